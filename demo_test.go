package kubectlbundle_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/demo"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

// TestDemoOnRealParts is make demo as a test: the blue/green flow on four
// real API servers, packages built, signed and deployed by the real zarf,
// the built-in gate, the switch followed by the real kubectl, then revert.
func TestDemoOnRealParts(t *testing.T) {
	zarf := tool(t, "zarf", "ZARF")
	if zarf == "" || testenv.Missing() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("zarf and the API server binaries are required under CI=true")
		}
		t.Skip("zarf or the API server binaries are not built (make testbin)")
	}
	root, _ := os.Getwd()
	var out bytes.Buffer
	// The real zarf first on PATH: the registered fake zarf must not answer.
	err := demo.Run(context.Background(), demo.Options{Root: root, Work: t.TempDir(), Out: &out, Path: []string{filepath.Dir(zarf)}})
	log := out.String()
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for _, want := range []string{
		`(?m)^v1 in slot a$`,
		`(?m)^✔ gate default: all 12 checks passed`,
		`(?m)^PASS: slot b passed its gate$`,
		`(?m)^switched to slot b \(previous: a\)`,
		`(?m)^v2 in slot b$`,
		`(?m)^context kind-airgap-mgmt +slot b \(agrees with active\)$`,
		`(?m)^PASS: switched back to slot a$`,
		`(?m)^PASS: candidate slot b destroyed$`,
	} {
		if !regexp.MustCompile(want).MatchString(log) {
			t.Errorf("demo output lacks %s", want)
		}
	}
	// After the revert, the alias reaches v1 in slot a again.
	if i := strings.LastIndex(log, "a regression found while soaking"); i < 0 || !strings.Contains(log[i:], "v1 in slot a") {
		t.Errorf("after revert the alias does not reach slot a")
	}
	if t.Failed() {
		t.Log(log)
	}
}
