package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenKeySignVerify(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "pw")
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(&out, []string{"gen-key", dir}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "checksums.txt")
	if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key, pub := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if err := run(&out, []string{"sign", "--key", key, file}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file + ".sigstore.json"); err != nil {
		t.Fatalf("no default bundle: %v", err)
	}
	out.Reset()
	if err := run(&out, []string{"verify", "--key", pub, file}); err != nil || !strings.HasPrefix(out.String(), "Verified OK: "+file+" signed by key SHA256:") {
		t.Fatalf("verify: %v %q", err, out.String())
	}
	if err := os.WriteFile(file, []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(&out, []string{"verify", "--key", pub, file}); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a changed file verified: %v", err)
	}
	t.Setenv("COSIGN_PASSWORD", "wrong")
	if err := run(&out, []string{"sign", "--key", key, file}); err == nil || !strings.Contains(err.Error(), "wrong password") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"frob", "x"}, {"sign", "f"}, {"verify", "f"}, {"check", "d"}, {"sign", "--key", "k"}, {"gen-key"}} {
		var u usageError
		if err := run(&bytes.Buffer{}, args); !errors.As(err, &u) {
			t.Errorf("%q: want a usage error, got %v", args, err)
		}
	}
}
