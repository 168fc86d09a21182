package e2e_test

import (
	"bytes"
	"context"
	"fmt"
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
	t.Parallel()
	zarf := tool(t, "zarf", "ZARF")
	if zarf == "" || testenv.Missing() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("zarf and the API server binaries are required under CI=true")
		}
		t.Skip("zarf or the API server binaries are not built (make testbin)")
	}
	var out bytes.Buffer
	shown := map[string]demo.ShownRun{}
	work := t.TempDir()
	// The real zarf first on PATH: the registered fake zarf must not answer.
	err := demo.Run(context.Background(), demo.Options{Root: repo(), Work: work, Out: &out, Path: []string{filepath.Dir(zarf)}, AllStrategies: true,
		Shown: func(name string, run demo.ShownRun) { shown[name] = run }})
	log := out.String()
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	pkgs := map[string]string{}
	for i, v := range []string{"v1", "v2", "v3"} {
		pkgs[v] = filepath.Join(work, fmt.Sprintf("zarf-package-site-amd64-%d.0.0.tar.zst", i+1))
	}
	checkShown(t, shown, shownScrubber(t, work, repo(), pkgs))
	for _, want := range []string{
		// The demo skips the offline check, and says so, and the
		// strategy runs record it skipped.
		`(?m)^demo: the offline check is skipped \(SKIP_OFFLINE_CHECK=1\): this machine's uplink is not the site's$`,
		`(?m)^PASS: isolation caller-monitored: connectivity check skipped \(SKIP_OFFLINE_CHECK=1\)`,
		`(?m)^v1 in slot a$`,
		`(?m)^✔ gate default: all 13 checks passed`,
		`(?m)^✔ slot-variable +the package declares the Zarf variable SLOT \(slot b deploys it with SLOT=b\)$`,
		`(?m)^✔ shared-names +0 name\(s\) on the shared Docker daemon or network, all different for slot b and slot a$`,
		`(?m)^workload-cluster +Cluster default/airgap-wl-b +Pass`,
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
	// After the revert, the alias reaches v1 in slot a again; in-place
	// moves it to v2 and back, recreate to v2.
	if i := strings.LastIndex(log, "a regression found while soaking"); i < 0 || !strings.Contains(log[i:], "v1 in slot a") {
		t.Errorf("after revert the alias does not reach slot a")
	}
	i := strings.Index(log, "in-place.sh: v2")
	j := strings.Index(log, "recreate.sh: slot a rebuilt")
	if i < 0 || j < i || !regexp.MustCompile(`(?s)v2 in slot a\n.*v1 in slot a\n`).MatchString(log[i:j]) {
		t.Errorf("in-place on the real parts did not deploy v2 and then v1")
	}
	if j < 0 || !strings.Contains(log[j:], "PASS: update committed") || !strings.Contains(log[j:], "v2 in slot a") {
		t.Errorf("recreate on the real parts did not rebuild slot a with v2")
	}
	if t.Failed() {
		t.Log(log)
	}
}
