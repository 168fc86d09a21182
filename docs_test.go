package kubectlbundle_test

import (
	"os"
	"strings"
	"testing"
)

// TestGuardTableIsOneTable: the table of the guard and the exit codes is
// written in docs/strategies.md and in the README; the two copies are the
// same table.
func TestGuardTableIsOneTable(t *testing.T) {
	table := func(file string) string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i, j := strings.Index(s, "<!-- guard-table"), strings.Index(s, "<!-- /guard-table -->")
		if i < 0 || j < i {
			t.Fatalf("%s has no guard table (<!-- guard-table ... <!-- /guard-table -->)", file)
		}
		s = s[i:j]
		return s[strings.Index(s, "\n")+1:] // the marker line names the other file
	}
	docs, readme := table("docs/strategies.md"), table("README.md")
	if docs != readme {
		t.Errorf("the guard table differs:\ndocs/strategies.md:\n%s\nREADME.md:\n%s", docs, readme)
	}
	for _, want := range []string{"| in-place | DEPLOYING, RESTORING |", "| recreate | TEARDOWN |", "| blue-green | accept (RETIRED) |", "2, in kubectl's form: `error: "} {
		if !strings.Contains(docs, want) {
			t.Errorf("the guard table lacks %q", want)
		}
	}
}
