package journalcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// siteCommand is `site`: the whole site in one view.
func siteCommand(streams kcli.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "site",
		Usage:     "the whole site as a tree: slots (active, soaking, the previous slot), each slot's package, gate and workload clusters, the open transaction and its phase, and the next command",
		ArgsUsage: " ",
		Description: `One view of the site, read from the state dir in one pass, as clusterctl
describe cluster shows a cluster: each slot with its role (active; soaking,
with the time left of the soak; the previous slot, kept for a switch back
until accept; the candidate of the open transaction), its package, its last gate result and
its workload clusters (the names the slot gives them, from config.yaml's
workloadClusters or an adopted site's own; kubectl bundle-slot losses SLOT
lists those running); then the open transaction with its phase, and the
next command, which is what kubectl bundle-journal next answers.

Nothing changes. Exit 3 when the next command is a repair (as journal next).
switch status, journal status and slot list each show one part of this.

Examples:
  kubectl bundle-journal site
  kubectl bundle-journal site -o json
  kubectl bundle-journal site -o jsonpath='{.next.command}'`,
		Action: func(_ context.Context, cmd *cli.Command) error { return siteCmd(streams, cmd) },
	}
}

// siteView is the site as one value: site -o json.
type siteView struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	StateDir   string `json:"stateDir"`
	// Active is the slot the active pointer names ("" when none), and
	// ActiveError why the pointer cannot be read.
	Active      string     `json:"active"`
	ActiveError string     `json:"activeError,omitempty"`
	Soak        *siteSoak  `json:"soak,omitempty"`
	Slots       []siteSlot `json:"slots"`
	// Transaction is the open transaction (nil when none), and
	// TransactionError why the journal cannot be read.
	Transaction      *journal.Transaction `json:"transaction"`
	TransactionError string               `json:"transactionError,omitempty"`
	// NextSource and Next are journal next's answer.
	NextSource string           `json:"nextSource"`
	Next       journal.NextStep `json:"next"`
}

// siteSoak is the soak the switch record says runs.
type siteSoak struct {
	Slot      string    `json:"slot"`
	Previous  string    `json:"previous"`
	Mode      string    `json:"mode,omitempty"`
	Started   time.Time `json:"started"`
	Window    string    `json:"window"`
	Ends      time.Time `json:"ends,omitzero"`
	Remaining string    `json:"remaining"`
	Over      bool      `json:"over"`
}

// siteSlot is one slot in the site view.
type siteSlot struct {
	Name string `json:"name"`
	// Active: the pointer names it; Soaking: it is active in a soak;
	// RevertTarget: the previous slot kept for a revert until accept;
	// Candidate: the open blue-green transaction builds it.
	Active       bool                `json:"active"`
	Soaking      bool                `json:"soaking"`
	RevertTarget bool                `json:"revertTarget"`
	Candidate    bool                `json:"candidate"`
	Provider     string              `json:"provider,omitempty"`
	State        string              `json:"state,omitempty"`
	Cluster      string              `json:"cluster,omitempty"`
	Context      string              `json:"context,omitempty"`
	Package      *slot.PackageRef    `json:"package,omitempty"`
	Gate         *slot.GateResult    `json:"gate,omitempty"`
	Deploying    *slot.DeployAttempt `json:"deploying,omitempty"`
	Workloads    []string            `json:"workloadClusters,omitempty"`
	// OwnsWorkloads are the workload clusters the slot keeps after an S1
	// (repoint) update moved the pointer away from it.
	OwnsWorkloads []string `json:"ownsWorkloadClusters,omitempty"`
	// Damaged says why the record cannot be read.
	Damaged string `json:"damaged,omitempty"`
}

func siteCmd(streams kcli.IOStreams, cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return kcli.Usage("site takes no arguments")
	}
	s, err := openSession(streams, cmd, false)
	if err != nil {
		return err
	}
	v, damage, err := readSite(s, time.Now())
	if err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		if err := kcli.WriteJSON(streams.Out, v); err != nil {
			return err
		}
		return damage
	}
	if err := writeSite(streams.Out, v); err != nil {
		return err
	}
	return damage
}

// readSite reads the site through internal/site and asks the planner for
// the next step.
func readSite(s *session, now time.Time) (*siteView, error, error) {
	here := site.Read(s.dir)
	v := &siteView{APIVersion: journal.APIVersion, Kind: "Site", StateDir: s.dir.Join(), Slots: []siteSlot{}}
	active, err := here.Active()
	if err != nil {
		v.ActiveError = err.Error()
	}
	v.Active = active
	t, err := here.Txn()
	if err != nil {
		v.TransactionError = err.Error()
	}
	v.Transaction = t
	revert := ""
	if sw, err := here.Switch(); err == nil && sw != nil && sw.Soaking() {
		revert = sw.Previous
		if !sw.SoakStarted.IsZero() {
			k := &siteSoak{Slot: sw.Target, Previous: sw.Previous, Mode: sw.Mode, Started: sw.SoakStarted, Window: sw.SoakWindow}
			if w, err := time.ParseDuration(sw.SoakWindow); err == nil {
				k.Ends = sw.SoakStarted.Add(w)
				left := k.Ends.Sub(now)
				if left <= 0 {
					left, k.Over = 0, true
				}
				k.Remaining = left.Round(time.Second).String()
			}
			v.Soak = k
		}
	}
	if revert == "" && active != "" {
		revert = here.Kept(active)
	}
	cfg, cfgErr := slot.LoadConfig(s.dir.Join("config.yaml"), os.Getenv, nil)
	for _, n := range here.Names() {
		sl := siteSlot{Name: n, Active: n == active, RevertTarget: n == revert && n != active}
		sl.Soaking = sl.Active && v.Soak != nil && v.Soak.Slot == n
		sl.Candidate = t != nil && t.Strategy == journal.BlueGreen && t.Slots.Candidate == n && !sl.Active
		rec, err := here.Slot(n)
		if err != nil {
			sl.Damaged = err.Error()
			v.Slots = append(v.Slots, sl)
			continue
		}
		sl.Provider, sl.State, sl.Cluster, sl.Context = rec.Provider, rec.State, rec.Cluster, rec.Context
		sl.Package, sl.Gate, sl.Deploying = rec.Package, rec.Gate, rec.Deploying
		sl.OwnsWorkloads = rec.OwnsWorkloads
		switch {
		case rec.Adopted:
			sl.Workloads = rec.Workloads
		case rec.Provider == slot.ProviderKind && cfgErr == nil:
			if names, err := cfg.NamesFor(n); err == nil {
				sl.Workloads = names.Workloads
			}
		}
		v.Slots = append(v.Slots, sl)
	}
	next, damage, err := planNext(s)
	if err != nil {
		return nil, nil, err
	}
	v.NextSource, v.Next = next.Source, next.Next
	return v, damage, nil
}

// writeSite prints the site as a tree: one row per object, its status
// beside it, as clusterctl describe cluster does.
func writeSite(w io.Writer, v *siteView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(prefix, name, status string) { fmt.Fprintf(tw, "%s%s\t%s\n", prefix, name, status) }
	row("", "NAME", "STATUS")
	row("", "Site "+v.StateDir, siteStatus(v))
	type node struct {
		name, status string
		kids         [][2]string
	}
	var nodes []node
	for _, sl := range v.Slots {
		nodes = append(nodes, node{"Slot " + sl.Name, slotRole(sl, v.Soak), slotRows(sl)})
	}
	if v.TransactionError != "" {
		nodes = append(nodes, node{"Transaction", "DAMAGED: " + v.TransactionError, nil})
	} else if t := v.Transaction; t != nil {
		var kids [][2]string
		kids = append(kids, [2]string{"Target", packageOf(t.Package, t.Target)})
		if t.Fallback != "" {
			kids = append(kids, [2]string{"Fallback", shortDigest(t.Fallback)})
		}
		if t.LastError != "" {
			kids = append(kids, [2]string{"Last error", t.LastError})
		}
		nodes = append(nodes, node{"Transaction " + t.ID, fmt.Sprintf("%s %s (%s)", t.Strategy, t.Phase, t.Status), kids})
	} else {
		nodes = append(nodes, node{"Transaction", "none open", nil})
	}
	var nextKids [][2]string
	for _, alt := range v.Next.Alternatives {
		nextKids = append(nextKids, [2]string{"or", alt})
	}
	if v.Next.Why != "" {
		nextKids = append(nextKids, [2]string{"why", v.Next.Why})
	}
	nodes = append(nodes, node{"Next", nextCommand(v.Next), nextKids})
	for i, n := range nodes {
		last := i == len(nodes)-1
		branch, stem := "├─", "│ "
		if last {
			branch, stem = "└─", "  "
		}
		row(branch, n.name, n.status)
		for j, k := range n.kids {
			kb := "├─"
			if j == len(n.kids)-1 {
				kb = "└─"
			}
			row(stem+kb, k[0], k[1])
		}
	}
	return tw.Flush()
}

func siteStatus(v *siteView) string {
	switch {
	case v.ActiveError != "":
		return "active pointer DAMAGED: " + v.ActiveError
	case v.Active == "":
		return "no active slot"
	}
	return "active slot " + v.Active
}

// slotRole says what the slot is to the site: active (soaking, with the
// time left), the revert target, the candidate, or spare.
func slotRole(sl siteSlot, soak *siteSoak) string {
	var parts []string
	switch {
	case sl.Soaking && soak.Over:
		parts = append(parts, fmt.Sprintf("ACTIVE, soak over (window %s): accept or switch back", soak.Window))
	case sl.Soaking:
		parts = append(parts, fmt.Sprintf("ACTIVE, soaking: %s left of %s", soak.Remaining, soak.Window))
	case sl.Active:
		parts = append(parts, "ACTIVE")
	case sl.RevertTarget:
		parts = append(parts, "previous: kept for a switch back until accept")
	case sl.Candidate:
		parts = append(parts, "candidate of the open transaction")
	default:
		parts = append(parts, "spare")
	}
	if sl.Damaged != "" {
		parts = append(parts, "record DAMAGED: "+sl.Damaged)
	} else if sl.State != "" {
		parts = append(parts, sl.State)
	}
	return strings.Join(parts, ", ")
}

func slotRows(sl siteSlot) [][2]string {
	if sl.Damaged != "" {
		return nil
	}
	var rows [][2]string
	if sl.Package != nil {
		rows = append(rows, [2]string{"Package", packageLabel(sl.Package)})
	} else {
		rows = append(rows, [2]string{"Package", "none deployed"})
	}
	rows = append(rows, [2]string{"Gate", gateLabel(sl)})
	c := sl.Context
	if sl.Cluster != "" {
		c = fmt.Sprintf("%s (context %s)", sl.Cluster, sl.Context)
	}
	rows = append(rows, [2]string{"Cluster", sl.Provider + ": " + c})
	if len(sl.Workloads) > 0 {
		rows = append(rows, [2]string{"Workload clusters", strings.Join(sl.Workloads, ", ")})
	}
	if len(sl.OwnsWorkloads) > 0 {
		rows = append(rows, [2]string{"Owns workload clusters", strings.Join(sl.OwnsWorkloads, ", ") + " (kept by an S1 repoint update)"})
	}
	return rows
}

func packageLabel(p *slot.PackageRef) string {
	if p.Name != "" {
		return fmt.Sprintf("%s %s (%s)", p.Name, p.Version, shortDigest(p.Digest))
	}
	return shortDigest(p.Digest)
}

// packageOf is a transaction's package: its file's name when known.
func packageOf(path, digest string) string {
	if path == "" {
		return shortDigest(digest)
	}
	i := strings.LastIndexAny(path, `/\`)
	return fmt.Sprintf("%s (%s)", path[i+1:], shortDigest(digest))
}

// shortDigest is a digest's first 12 hex digits.
func shortDigest(digest string) string { return short(strings.TrimPrefix(digest, "sha256:")) }

func gateLabel(sl siteSlot) string {
	if sl.Deploying != nil {
		return "not gated: " + sl.Deploying.Describe()
	}
	g := sl.Gate
	if g == nil {
		return "never gated"
	}
	v := "passed"
	if !g.Passed {
		v = "FAILED"
		if len(g.Failed) > 0 {
			v += " (" + strings.Join(g.Failed, ", ") + ")"
		}
	}
	at := g.Time.UTC().Format(time.RFC3339)
	if sl.Package != nil && g.Package != "" && g.Package != sl.Package.Digest {
		return fmt.Sprintf("%s %s, for another package than the one deployed", v, at)
	}
	return v + " " + at
}

func nextCommand(n journal.NextStep) string {
	switch {
	case n.Wait != "":
		return "wait for " + n.Wait + " to finish"
	case n.Command != "":
		return n.Command
	}
	return "nothing to run"
}
