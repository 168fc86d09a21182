package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestExecKeepsArgvAndOutput(t *testing.T) {
	out, err := Exec{}.Run(context.Background(), "sh", "-c", "echo hello")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("got %q, %v", out, err)
	}
	_, err = Exec{Env: []string{"GREETING=it's broken"}}.Run(context.Background(), "sh", "-c", `echo "$GREETING" >&2; exit 3`)
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("want *RunError, got %T %v", err, err)
	}
	msg := err.Error()
	for _, want := range []string{"running sh -c 'echo \"$GREETING\" >&2; exit 3'", "exit status 3", "it's broken"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	_, err = Exec{}.Run(context.Background(), "kubectl-bundle-no-such-program")
	if !NotFound(err) {
		t.Errorf("NotFound(%v) = false", err)
	}
}
