package slotcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/switchover"
	"github.com/kubectl-bundle/kubectl-bundle/internal/verifycmd"
)

const adoptDescription = `Registers a site built before the slots (offline-run.sh's kind cluster
airgap-mgmt, its registry container krops-registry-airgap on port 5002, the
context kind-airgap-mgmt, the workload cluster airgap-wl) as the active
SLOT, without changing the cluster or its containers.

It is a first install: refused (exit 4) while any slot is active or has a
record, or a transaction is open. The archive is verified as kubectl
bundle-verify verifies it (the same flags over config.yaml's verify:) and
staged; the digest zarf computes for it must equal the one zarf recorded
when it deployed the package (the secret zarf-package-<name> in namespace
zarf): another package is exit 1, no record or no digest in it exit 3.

The cluster's credentials are copied into a context of the slot's own
(kind-<clusterPrefix>-SLOT, as create names it) and the alias context is
pointed at it, so the alias can move to another slot and retiring this one
never deletes it. The record keeps the site's names: the gate checks the
unsuffixed workload clusters, a blue-green builds the other slot next to
them, and destroy removes what the record names.

What a slot built beside the site needs is read from the site and written
into the state dir's config.yaml (keys it sets already, and comments, are
kept): nodeImage and registryImage, the images the site's node container
(<cluster>-control-plane) and registry container run, pinned by image ID;
archives, the directory --archives names (made absolute); initPackageGlob,
when the default matches no init package there and exactly one file does;
seed, what the site's registry holds (its catalog and tags on
127.0.0.1:<registry-port>), copied into the state dir's seed/ as OCI
layouts for create to push into the new slot's registry. A setting it
cannot determine is printed with the line to add.

Examples:
  kubectl bundle-slot adopt a --package zarf-package-app-amd64-1.0.0.tar.zst --key cosign.pub --archives archives
  kubectl bundle-slot adopt a --package app-1.0.0.tar.zst --key cosign.pub --cluster airgap-mgmt --workload-clusters airgap-wl`

func adoptCommand(action cli.ActionFunc) *cli.Command {
	d := slot.Defaults()
	return &cli.Command{Name: "adopt", Usage: "register a running site (offline-run.sh's) as the active SLOT without changing it: a first install", ArgsUsage: "SLOT",
		Description: adoptDescription,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "package", Usage: "the archive the site was deployed from (verified and staged here)", TakesFile: true},
			&cli.StringFlag{Name: "cluster", Usage: "the site's kind cluster (default clusterPrefix: " + d.ClusterPrefix + "); its context is --context, default kind-<cluster>"},
			&cli.StringFlag{Name: "registry", Usage: "the site's registry container (default registryName: " + d.RegistryName + ")"},
			&cli.IntFlag{Name: "registry-port", Usage: fmt.Sprintf("its published host port (default registryPortBase: %d)", d.RegistryPortBase)},
			&cli.StringSliceFlag{Name: "workload-clusters", Usage: "the site's CAPD workload clusters, unsuffixed (default workloadClusters: " + strings.Join(d.WorkloadClusters, ",") + ")"},
			&cli.StringFlag{Name: "archives", Usage: "the site's archives directory (its zarf init package and image archives): written into config.yaml as archives, made absolute [$" + slot.EnvVars["archives"] + "]", TakesFile: true},
		}, verifycmd.PolicyFlags()...),
		Action: action}
}

func adopt(ctx context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	pkg := cmd.String("package")
	if pkg == "" {
		return kcli.Usage("adopt needs the archive the site was deployed from: --package ARCHIVE")
	}
	cfg := s.m.Config
	if _, err := cfg.NamesFor(name); err != nil {
		return err
	}
	if cfg.Provider != slot.ProviderKind {
		return kcli.Usage("adopt registers a kind site: it needs provider kind, config says %s", cfg.Provider)
	}
	if err := firstInstall(s, name); err != nil {
		return err
	}
	o := cfg.AdoptDefaults()
	if v := cmd.String("cluster"); v != "" {
		o.Cluster, o.Context = v, "kind-"+v
	}
	if v := cmd.String("context"); v != "" {
		o.Context = v
	}
	if v := cmd.String("registry"); v != "" {
		o.Registry = v
	}
	if v := cmd.Int("registry-port"); v != 0 {
		o.RegistryPort = int(v)
	}
	if v := cmd.StringSlice("workload-clusters"); len(v) > 0 {
		o.Workloads = v
	}
	rep, err := verifycmd.VerifyAndStage(ctx, cmd, s.common, s.dir, pkg)
	if err != nil {
		return err
	}
	o.Package, o.Digest, o.Name, o.Version = rep.Staged.Path, rep.SHA256, rep.Package.Name, rep.Package.Version
	so := siteOptions(cmd, cfg)
	o.Site = &so
	res, err := s.m.Adopt(ctx, name, o)
	if err != nil {
		return err
	}
	state.CrashPoint("adopt:before-register")
	sw := &switchover.Switcher{Dir: s.dir, Run: runner.From(ctx), Journal: s.Journal, AliasContext: cfg.AliasContext,
		RegistryAlias: cfg.RegistryAlias, Network: cfg.Network, Kubeconfig: s.m.Kubeconfig, Now: time.Now, Log: s.m.Log}
	if err := sw.Register(name); err != nil {
		return fmt.Errorf("slot %s is recorded, but making it active failed: %w (%s finishes it)", name, err, s.dir.Plugin("switch", "to", name, "--force"))
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, res)
	}
	if s.common.Quiet {
		return nil
	}
	r := res.Record
	fmt.Fprintf(s.streams.Out, "slot %s adopted and active: %s, workload clusters %s\n", name, slot.Summary(r), strings.Join(r.Workloads, ", "))
	fmt.Fprintf(s.streams.Out, "package: %s, zarf digest %s (as recorded in %s)\n", packageString(r.Package), res.ManifestDigest, res.Secret)
	fmt.Fprintf(s.streams.Out, "context %s -> %s (the slot's own copy of %s's credentials)\n", cfg.AliasContext, r.Context, o.Context)
	printSite(s.streams.Out, res.Config)
	fmt.Fprintf(s.streams.Out, "next: record its gate: %s\n", s.dir.Plugin("gate", "--slot", name, "--record"))
	return nil
}

// siteOptions: the archives directory the operator named, and how.
func siteOptions(cmd *cli.Command, cfg *slot.Config) slot.SiteOptions {
	var from string
	switch {
	case cmd.IsSet("archives"):
		from = "--archives"
	case os.Getenv(slot.EnvVars["archives"]) != "":
		from = "$" + slot.EnvVars["archives"]
	case cfg.FromFile("archives"):
		from = "config.yaml"
	default:
		return slot.SiteOptions{}
	}
	return slot.SiteOptions{Archives: cfg.Archives, ArchivesFrom: from}
}

// printSite prints what adopt read from the site and wrote into config.yaml.
func printSite(w io.Writer, site *slot.SiteRead) {
	if site == nil {
		return
	}
	fmt.Fprintf(w, "config.yaml (%s), read from the site:\n", site.File)
	for _, st := range site.Settings {
		val := ""
		switch v := st.Value.(type) {
		case string:
			val = v
		case []seed.Entry:
			var refs []string
			for _, e := range v {
				refs = append(refs, e.Ref+"="+e.Path)
			}
			val = strings.Join(refs, ", ")
		}
		line := fmt.Sprintf("  %-16s %s", st.Key+":", st.Status)
		if val != "" {
			line += " " + val
		}
		line += " (" + st.From + ")"
		if st.Note != "" {
			line += ": " + st.Note
		}
		fmt.Fprintln(w, line)
	}
	if unknown := site.Unknown(); len(unknown) > 0 {
		fmt.Fprintf(w, "not determined: add to %s before creating another slot:\n", site.File)
		for _, st := range unknown {
			for _, l := range strings.Split(st.Add, "\n") {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
}

// firstInstall refuses adopt unless the site has no slot yet: none is
// active, none has a record, no transaction is open. Damaged state stops
// it with its repair, as it stops every mutating command.
func firstInstall(s *session, name string) error {
	p, err := s.Protection()
	if err != nil {
		return err
	}
	refuse := func(why string) error {
		return errkind.New(errkind.Conflict, "adopt is a first install and %s: it registers a site only where no slot exists yet (%s shows the slots)", why, s.dir.Plugin("slot", "list"))
	}
	if p.Active != "" {
		return refuse("slot " + p.Active + " is active")
	}
	if p.Txn != nil {
		return refuse(fmt.Sprintf("transaction %s is open (%s)", p.Txn.ID, s.dir.Plugin("journal", "status")))
	}
	names, err := slot.List(s.dir)
	if err != nil {
		return kcli.Environment(err)
	}
	if len(names) > 0 {
		return refuse("slot " + strings.Join(names, ", ") + " has a record")
	}
	_ = name
	return nil
}
