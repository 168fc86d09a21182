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
// material the script began t with, else that of t's staged target, else
// that of its staged fallback.
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
	if v == nil && d != nil && t.Fallback != "" {
		// Begun without its material and the target not staged: the
		// material the package the update began from was verified with
		// (a site signs its packages alike; a wrong key fails closed).
		if p, err := stage.Lookup(d, &stage.Ref{Digest: t.Fallback}); err == nil {
			r := p.Record
			if m := (&journal.Verification{Key: r.Key, TrustedRoot: r.TrustedRoot, Identity: r.Report.Signer.Identity, Issuer: r.Report.Signer.Issuer}); m.Args() != nil {
				v = m
			}
		}
	}
	return t, v
}
