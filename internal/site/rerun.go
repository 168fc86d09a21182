package site

import (
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Rerun is the line that runs t's strategy script again, as journal next
// names it: its package by a file, its verification material, its gate.
func Rerun(d *state.Dir, t *journal.Transaction) advice.Cmd {
	t, v := Material(d, t)
	return journal.ApplyCmd(t, v).WithEnv(d.CommandEnv())
}

// Material is t with its package named by a file, and the verification
// material the script began t with, else that of t's staged target.
func Material(d *state.Dir, t *journal.Transaction) (*journal.Transaction, *journal.Verification) {
	var v *journal.Verification
	if t.Verify.Args() != nil {
		v = t.Verify
	}
	if d != nil && t.Target != "" {
		if p, err := stage.Lookup(d, &stage.Ref{Digest: t.Target}); err == nil {
			r := p.Record
			if v == nil {
				v = &journal.Verification{Key: r.Key, TrustedRoot: r.TrustedRoot, Identity: r.Report.Signer.Identity, Issuer: r.Report.Signer.Issuer}
			}
			if t.Package == "" && p.Path != "" {
				// Begun with a digest: the scripts take a file, and the
				// staged copy is that digest's file, by an absolute path.
				c := *t
				c.Package = p.Path
				t = &c
			}
		}
	}
	return t, v
}
