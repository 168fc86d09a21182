package journalcmd

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/evidence"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	statesession "github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/sigblob"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// evidenceCommand is `evidence [ID]`: export a transaction's evidence.
func evidenceCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "evidence",
		Usage:     "export a transaction's evidence (default the open one, else the newest) with a sha256sum -c file, signed with --signing-key",
		ArgsUsage: "[ID]",
		Description: `Every transaction keeps its evidence in <state-dir>/transactions/<ID>/: the
verification record (verification.json), the SBOM documents extracted and
decoded (sbom/), the gate results (gate/), the debug captures of a failed
deploy or gate (debug/), the script's summary of PASS/FAIL lines and its
RESULT line (summary.txt), its full output (output.log), the slots it
deployed (deployed.jsonl) and its history events (history.jsonl).

--dir DIR (or --tar FILE) exports it with SHA256SUMS (check it with
sha256sum -c SHA256SUMS); --signing-key KEY (a cosign private key; its
password in $COSIGN_PASSWORD) signs SHA256SUMS into
SHA256SUMS.sigstore.json, which the connected side checks offline:

  cosign verify-blob --key cosign.pub --bundle SHA256SUMS.sigstore.json --insecure-ignore-tlog=true SHA256SUMS

Retention: journal end keeps the evidence of the last evidenceKeep
transactions (config.yaml, $KUBECTL_BUNDLE_EVIDENCE_KEEP; default 20, 0
keeps all), and never that of the transactions that deployed the active
slot or the previous one.

-o is the output format, as everywhere (-o json: the export's files and
sums; with --list and --path too); --output-dir is the old spelling of
--dir, still accepted with a warning.

Examples:
  kubectl bundle-journal evidence --list
  kubectl bundle-journal evidence --dir evidence-out
  COSIGN_PASSWORD=... kubectl bundle-journal evidence 20261201-101500-a1b2c3 --dir evidence-out --signing-key cosign.key
  kubectl bundle-journal evidence --tar evidence.tar -o json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "export into this directory (new or empty)", TakesFile: true},
			&cli.StringFlag{Name: "output-dir", Usage: "deprecated: --dir", TakesFile: true, Hidden: true},
			&cli.StringFlag{Name: "tar", Usage: "export as this tar archive instead (files under evidence-<ID>/)", TakesFile: true},
			&cli.StringFlag{Name: "signing-key", Usage: "cosign private key that signs SHA256SUMS (password in $COSIGN_PASSWORD); --key is a public key everywhere else", TakesFile: true},
			&cli.BoolFlag{Name: "list", Usage: "list the transactions that have evidence, oldest first"},
			&cli.BoolFlag{Name: "path", Usage: "print the evidence directory of the open transaction (created when missing; what the strategy scripts tee their output into)"},
		},
		Action: func(_ context.Context, cmd *cli.Command) error { return evidenceCmd(streams, cmd) },
	}
}

func evidenceCmd(streams kcli.IOStreams, cmd *cli.Command) error {
	if cmd.NArg() > 1 {
		return kcli.Usage("want at most one transaction ID")
	}
	// -o DIR was this command's directory once: said so when -o names no format.
	if o := cmd.String("output"); kcli.ValidateOutput(o) != nil {
		return kcli.Usage("-o %s: -o is the output format (text, json, yaml or jsonpath=TEMPLATE); export into a directory with --dir %s", o, o)
	}
	dir := cmd.String("dir")
	if old := cmd.String("output-dir"); old != "" {
		fmt.Fprintln(streams.ErrOut, "warning: --output-dir is deprecated: use --dir")
		if dir == "" {
			dir = old
		}
	}
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	switch {
	case cmd.Bool("list"):
		ids, err := evidence.List(s.dir)
		if err != nil {
			return kcli.Environment(err)
		}
		if s.common.Output == kcli.OutputJSON {
			return kcli.WriteJSON(streams.Out, evidenceList{APIVersion: journal.APIVersion, Kind: "EvidenceList", Transactions: append([]string{}, ids...)})
		}
		for _, id := range ids {
			fmt.Fprintln(streams.Out, id)
		}
		return nil
	case cmd.Bool("path"):
		t, err := site.ReadTxn(s.dir)
		if err != nil {
			return err
		}
		if t == nil {
			return kcli.Conflict(fmt.Errorf("no transaction in progress: its evidence has no directory yet"))
		}
		p, err := evidence.Ensure(s.dir, t.ID)
		if err != nil {
			return kcli.Environment(err)
		}
		if s.common.Output == kcli.OutputJSON {
			return kcli.WriteJSON(streams.Out, evidencePath{APIVersion: journal.APIVersion, Kind: "EvidencePath", Transaction: t.ID, Path: p})
		}
		fmt.Fprintln(streams.Out, p)
		return nil
	}
	out, tarFile := dir, cmd.String("tar")
	if (out == "") == (tarFile == "") {
		return kcli.Usage("give one of --dir DIR and --tar FILE")
	}
	id := cmd.Args().First()
	if id == "" {
		if id, err = defaultEvidence(s); err != nil {
			return err
		}
	}
	o := evidence.ExportOptions{Dir: out, Tar: tarFile}
	if k := cmd.String("signing-key"); k != "" {
		b, err := os.ReadFile(k)
		if err != nil {
			return kcli.Usage("--signing-key: %v", err)
		}
		if o.Signer, err = sigblob.LoadPrivateKey(b, []byte(os.Getenv("COSIGN_PASSWORD"))); err != nil {
			return kcli.Usage("--signing-key %s: %v (a cosign private key; its password in $COSIGN_PASSWORD)", k, err)
		}
	}
	res, err := evidence.Export(s.dir, id, o)
	if err != nil {
		return err
	}
	for _, sk := range res.Skipped {
		fmt.Fprintf(streams.ErrOut, "warning: %s in the evidence of %s is not a regular file: left out\n", sk, id)
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(streams.Out, res)
	}
	if !s.common.Quiet {
		fmt.Fprintf(streams.Out, "exported the evidence of transaction %s to %s: %d files, %s", id, res.Path, len(res.Files), res.Sums)
		if res.Signed {
			fmt.Fprintf(streams.Out, ", signed (%s)", evidence.SignatureFile)
		}
		fmt.Fprintln(streams.Out)
	}
	return nil
}

// evidenceList is evidence --list -o json.
type evidenceList struct {
	APIVersion   string   `json:"apiVersion"`
	Kind         string   `json:"kind"`
	Transactions []string `json:"transactions"`
}

// evidencePath is evidence --path -o json.
type evidencePath struct {
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Transaction string `json:"transaction"`
	Path        string `json:"path"`
}

// defaultEvidence is the open transaction, else the newest with evidence.
func defaultEvidence(s *session) (string, error) {
	if t, err := site.ReadTxn(s.dir); err == nil && t != nil {
		return t.ID, nil
	}
	ids, err := evidence.List(s.dir)
	if err != nil {
		return "", kcli.Environment(err)
	}
	if len(ids) == 0 {
		return "", kcli.Usage("no transaction has evidence in %s yet", s.dir.Join(evidence.Dir))
	}
	return ids[len(ids)-1], nil
}

// keepEvidence records what t is and, once its package is verified, the
// verification record and SBOMs. Best effort: a warning, never a failure.
func keepEvidence(w io.Writer, d *state.Dir, t *journal.Transaction) {
	if t == nil {
		return
	}
	evidence.Warn(w, "recording transaction "+t.ID, evidence.KeepTransaction(d, t))
	if st := t.Step(journal.Verified); st != nil && st.Status == journal.StatusDone {
		evidence.Warn(w, "keeping the verification record and SBOMs of "+t.ID, evidence.KeepVerification(d, t.ID, t.Target))
	}
}

// closeEvidence keeps the history of the ended transaction t and applies
// retention. Best effort.
func closeEvidence(w io.Writer, s *statesession.Session, t *journal.Transaction) {
	keepEvidence(w, s.Dir, t)
	evidence.Warn(w, "keeping the history of "+t.ID, evidence.KeepHistory(s.Dir, t.ID))
	cfg, err := slot.LoadConfig(s.Dir.Join("config.yaml"), os.Getenv, nil)
	if err != nil {
		evidence.Warn(w, "retention", err)
		return
	}
	serving := evidence.Serving{}
	var names []string
	if active, err := site.Read(s.Dir).Active(); err == nil && active != "" {
		names = append(names, active)
	}
	if sw, err := site.Read(s.Dir).Switch(); err == nil && sw != nil && sw.Previous != "" {
		names = append(names, sw.Previous)
	}
	for _, n := range names {
		if rec, err := slot.Load(s.Dir, n); err == nil && rec.Package != nil {
			serving[n] = rec.Package.Digest
		}
	}
	removed, err := evidence.Prune(s.Dir, cfg.EvidenceKeep, evidence.MadeBy(s.Dir, serving))
	evidence.Warn(w, "retention", err)
	for _, id := range removed {
		fmt.Fprintf(w, "evidence of transaction %s removed (evidenceKeep %d)\n", id, cfg.EvidenceKeep)
	}
}
