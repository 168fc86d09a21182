package kubectlbundle_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// bash runs script with bash in the checkout, under the kind core's
// options, and returns its stdout, stderr and exit code.
func bash(t *testing.T, script string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -o errexit -o nounset -o pipefail\n"+script)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// statement is the statement of file that spans the line holding from and
// the line holding to (either first).
func statement(t *testing.T, file, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	i, j := -1, -1
	for n, l := range lines {
		if i < 0 && strings.Contains(l, from) {
			i = n
		}
		if j < 0 && strings.Contains(l, to) {
			j = n
		}
	}
	if i < 0 || j < 0 {
		t.Fatalf("%s has no statement from %q to %q", file, from, to)
	}
	return strings.Join(lines[min(i, j):max(i, j)+1], "\n")
}

// slowDescribe is kubectl-bundle-slot describe a of a freshly created slot
// as a loaded machine runs it: the record's rows, those after the first
// seed's coming 0.2 s apart (describe writes its table row by row), with
// the prelude of the kind core's checks.
const slowDescribe = `fail() { echo "e2e-kind: FAIL: $*" >&2; exit 1; }
if [ -f hack/e2e-check.sh ]; then . hack/e2e-check.sh; fi
check_dir=$(mktemp -d)
kubectl-bundle-slot() {
  [ "$*" = "describe a" ] || exit 2
  printf '%-12s%s\n' slot a active false provider kind state ready cluster kb-e2e-a context kind-kb-e2e-a \
    registry 'kb-e2e-registry-a on 127.0.0.1:5902' package - gate - created 2026-12-03T09:00:00Z
  printf '%-12s%s\n' '  seeded' "krops:latest sha256:b53b9861$(printf '%050d' 0)5da727 (flux-artifact from config-artifact, pushed)"
  for row in "seeded charts/bench:0.1.0 sha256:ffd77292$(printf '%052d' 0)eece7 (helm-chart from charts/bench-0.1.0.tgz, pushed)" \
    'step create/load-images done 2026-12-03T09:00:05Z' 'step create/cluster done 2026-12-03T09:00:15Z' \
    'step create/registry done 2026-12-03T09:00:17Z' 'step create/seed done 2026-12-03T09:00:18Z' \
    'step create/kubeconfig done 2026-12-03T09:00:18Z' 'step create/zarf-init done 2026-12-03T09:00:26Z'; do
    sleep 0.2
    printf '  %-10s%s\n' "${row%% *}" "${row#* }"
  done
}
`

// TestKindCoreSeedCheckWhileDescribeStillWrites: hack/e2e-kind.sh's check
// that slot a's record keeps the seed of krops:latest, run as the script
// has it while describe still writes the rows after the seed's (issue 31:
// on a loaded machine grep -q found the row and exited, describe died of
// SIGPIPE writing the next one, and pipefail failed the check). The check
// must pass: the row is there. The control shows the condition is real:
// the old form, describe | grep -Eq, fails under it with describe at 141.
func TestKindCoreSeedCheckWhileDescribeStillWrites(t *testing.T) {
	control := slowDescribe + `set +o errexit
kubectl-bundle-slot describe a | grep -Eq 'seeded +krops:latest sha256:[0-9a-f]{64} \(flux-artifact from config-artifact, pushed\)'
echo "${PIPESTATUS[*]}"
`
	if out, errOut, code := bash(t, control); strings.TrimSpace(out) != "141 0" || code != 0 {
		t.Fatalf("control: describe | grep -Eq exited %q (describe, grep), want \"141 0\" (describe killed by SIGPIPE after grep found the row); exit %d, stderr:\n%s", out, code, errOut)
	}

	stmt := statement(t, "hack/e2e-kind.sh", "kubectl-bundle-slot describe a", "keep the seed of krops:latest")
	out, errOut, code := bash(t, slowDescribe+stmt+"\necho checked\n")
	if code != 0 || strings.TrimSpace(out) != "checked" || errOut != "" {
		t.Errorf("hack/e2e-kind.sh's seed check, while describe still writes after the seed's row:\n%s\nexited %d, want 0; stdout:\n%s\nstderr:\n%s", stmt, code, out, errOut)
	}
}

// TestCheckKeepsTheFailure: a check that fails logs what it expected, the
// command, its exit code and its whole stdout and stderr, and exits 1; one
// that passes prints nothing and leaves the command's stdout in $checked.
func TestCheckKeepsTheFailure(t *testing.T) {
	const prelude = ". hack/e2e-check.sh\ncheck_dir=$(mktemp -d)\n"
	const cmd = `printf 'one\ntwo words\n'; printf 'err line\n' >&2; exit 3`

	out, errOut, code := bash(t, prelude+`check "the answer is wrong" --has '^three$' -- sh -c "`+cmd+`"
echo not reached`)
	if code != 1 || out != "" {
		t.Errorf("a failing check exited %d with stdout %q, want 1 and nothing", code, out)
	}
	for _, want := range []string{
		"e2e-kind: FAIL: the answer is wrong\n",
		"  expected exit code 0\n",
		"  expected a line matching: ^three$\n",
		"  command: sh -c 'printf '\\''one\\ntwo words\\n'\\''; printf '\\''err line\\n'\\'' >&2; exit 3'\n",
		"  exit code: 3\n",
		"--- its stdout (2 lines):\none\ntwo words\n--- its stderr (1 lines):\nerr line\n--- end of its output\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the failure's log lacks %q:\n%s", want, errOut)
		}
	}

	passes := []struct{ expect, cmd string }{
		{`--has 'two +words'`, `printf 'one\ntwo  words\n'`},
		{`--lacks '^three'`, `printf 'one\ntwo\n'`},
		{`--line two`, `printf 'one\ntwo\n'`},
		{`--is 'one'`, `printf 'one\n\n'`},
		{`--rc 4 --has one`, `echo one; exit 4`},
		{`--rc nonzero`, `exit 1`},
		{`--rc any --both --line err`, `echo err >&2; exit 5`},
	}
	for _, p := range passes {
		out, errOut, code := bash(t, prelude+`check "failed" `+p.expect+` -- sh -c "`+p.cmd+`"
printf '%s' "$checked"`)
		// $checked is what the EXPECTs read: stdout, or with --both stdout and stderr.
		redirect := " 2>/dev/null"
		if strings.Contains(p.expect, "--both") {
			redirect = " 2>&1"
		}
		want, _, _ := bash(t, "{ "+p.cmd+"; }"+redirect+" || true")
		if code != 0 || errOut != "" || out != strings.TrimRight(want, "\n") {
			t.Errorf("check %s -- sh -c %q: exit %d, stdout %q (want its stdout %q in $checked), stderr:\n%s", p.expect, p.cmd, code, out, strings.TrimRight(want, "\n"), errOut)
		}
	}
	fails := []struct{ expect, cmd, why string }{
		{`--lacks '^two'`, `printf 'one\ntwo\n'`, "expected no line matching: ^two"},
		{`--line tw`, `printf 'one\ntwo\n'`, "expected the line: tw"},
		{`--is one`, `printf 'one\ntwo\n'`, "expected the output: one"},
		{`--rc 4`, `exit 0`, "expected exit code 4"},
		{`--rc nonzero`, `true`, "expected exit code nonzero"},
		{`--line err`, `echo err >&2`, "expected the line: err"},
	}
	for _, f := range fails {
		_, errOut, code := bash(t, prelude+`check "failed" `+f.expect+` -- sh -c "`+f.cmd+`"`)
		if code != 1 || !strings.Contains(errOut, "e2e-kind: FAIL: failed\n  "+f.why+"\n") {
			t.Errorf("check %s -- sh -c %q: exit %d, want 1 with %q; stderr:\n%s", f.expect, f.cmd, code, f.why, errOut)
		}
	}
}

// TestKindCoreChecksReadWholeOutputs: no command of the kind core is piped
// into a reader that quits before its writer is done (grep -q, head):
// under pipefail the writer's SIGPIPE fails the step, or, in an if, turns
// a found line into a miss. Its checks go through check (hack/e2e-check.sh).
func TestKindCoreChecksReadWholeOutputs(t *testing.T) {
	early := regexp.MustCompile(`\|\s*(grep\s+(-[A-Za-z]+\s+)*-[A-Za-z]*q[A-Za-z]*|head)\b`)
	for _, f := range []string{"hack/e2e-kind.sh", "hack/e2e-kind-more.sh", "hack/e2e-kind-adopt.sh", "hack/e2e-kind-flux.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, l := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(l, " #"); early.MatchString(code) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				t.Errorf("%s:%d pipes into a reader that quits early: %s", f, n+1, strings.TrimSpace(l))
			}
		}
	}
}
