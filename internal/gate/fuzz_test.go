package gate

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse: any bytes either parse into a gate that validates, or fail
// with a *SpecError; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte("apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nspec:\n  checks:\n  - name: a\n    field: {apiVersion: v1, kind: Pod, name: x, path: '{.a}', matches: 'b+'}\n"))
	f.Add([]byte("apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nspec:\n  pollInterval: 1s\n  checks:\n  - name: w\n    workload: {cluster: c, checks: [{name: n, nodes: {min: 2}}]}\n"))
	f.Add([]byte("kind: Gate\n&a [*a, *a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, _, err := Parse(bytes.NewReader(data))
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if _, err := g.Validate(); err != nil {
			t.Fatalf("parsed but does not validate: %v", err)
		}
		if g.Poll() <= 0 {
			t.Fatal("non-positive poll interval")
		}
	})
}
