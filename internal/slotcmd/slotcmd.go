// Package slotcmd is the kubectl-bundle-slot command: preflight, create,
// deploy, destroy, list and describe side-by-side environments.
package slotcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/bluegreen"
	"github.com/kubectl-bundle/kubectl-bundle/internal/capture"
	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/evidence"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/kubeflags"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	statesession "github.com/kubectl-bundle/kubectl-bundle/internal/session"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

const description = `A slot is a named environment (a, b) holding one management cluster and its
registry. Blue/green needs two at once; recreate and in-place use one. Every
name is derived from the slot, so two slots never collide:

  kind cluster   <clusterPrefix>-<slot>      (airgap-mgmt-a; context kind-airgap-mgmt-a)
  registry       <registryName>-<slot>       (krops-registry-airgap-a on 127.0.0.1:<registryPortBase + index>)
  workloads      <workloadCluster>-<slot>    (the package gets --set-variables SLOT=<slot>)

Providers: kind (default; the kind library on Docker, one control-plane node
with the Docker socket mounted, then zarf init --registry-mode=nodeport) and
existing (a kube context you already have; --context).

Each kind slot's workloads pull from the slot's own registry (the package
names it with SLOT); the shared alias (registryAlias) is for operators and
moves at the switch. create seeds that registry, as stage-and-create-cluster.sh
seeds krops-registry, with config.yaml's seed: list (or --seed REF=PATH):

  seed:
    - {ref: krops:latest, path: config-artifact}            # a directory: a Flux artifact
    - {ref: charts, path: charts/flux-operator-0.58.0.tgz}  # a chart: charts/flux-operator:0.58.0
    - {ref: extra/thing:v1, path: layouts/thing}            # an OCI layout (directory or .tar)

Paths are relative to --archives. An artifact whose digest the registry has
under its ref already is not sent again; every pushed manifest is read back
and checked by digest; each is kept in the slot's record (describe) and the
history.

Settings come from flags, then KUBECTL_BUNDLE_* variables, then
<state-dir>/config.yaml (kind: Config), then the krops defaults.`

// exitCodes is this binary's part of the suite's exit-code table.
var exitCodes = kcli.ExitCodesHelp("", map[errkind.Kind]string{
	errkind.Negative:    "deploy of a package verify has not accepted (without --insecure); adopt of an archive that fails verification or is not the package the site runs",
	errkind.Usage:       "an unknown slot, a bad setting, a package path that does not exist",
	errkind.Environment: "preflight found a blocker (Docker down, a port or name taken, too little memory or disk); docker, kind or zarf failed",
	errkind.Conflict:    "locked; the slot exists with other settings; a protected slot (the active one, or the previous one during a soak) without --force; adopt where a slot is active or recorded",
})

// Deps are the parts tests replace: the kind provider and the registry probe.
type Deps struct {
	Kind  slot.ClusterProvider
	Probe func(ctx context.Context, url string) error
	Sleep func(time.Duration)
}

// Command builds kubectl-bundle-slot.
func Command(streams kcli.IOStreams, deps Deps) *cli.Command {
	slotArg := func(action func(ctx context.Context, cmd *cli.Command, s *session) error, mutate bool) cli.ActionFunc {
		return func(ctx context.Context, cmd *cli.Command) error {
			s, err := open(ctx, streams, cmd, deps, mutate)
			if err != nil {
				return err
			}
			defer s.close()
			return action(ctx, cmd, s)
		}
	}
	pkgFlag := &cli.StringFlag{Name: "package", Usage: "the package to deploy next (path or staged digest): sizes the disk check"}
	return kcli.Root(streams, &cli.Command{
		Name:        "kubectl-bundle-slot",
		Usage:       "create / deploy / destroy / list side-by-side environments (slots) without collisions",
		Description: description + "\n\n" + slotExamples + "\n\n" + exitCodes,
		Flags:       configFlags(),
		Commands: []*cli.Command{
			{Name: "preflight", Description: "Examples:\n  kubectl bundle-slot preflight b --package zarf-package-app-amd64-1.1.0.tar.zst\n  kubectl bundle-slot preflight b --package zarf-package-app-amd64-1.1.0.tar.zst --blue-green", Usage: "check, before any change, that SLOT can be built here; prints every finding", ArgsUsage: "SLOT",
				Flags: []cli.Flag{pkgFlag, &cli.BoolFlag{Name: "blue-green", Usage: "also check that --package is fit for blue/green (S2): it declares the Zarf variable SLOT, no name it puts on the shared Docker daemon or network is the same for both slots, and none is another slot's"},
					&cli.StringFlag{Name: "switch-mode", Usage: "with --blue-green: " + journal.SwitchModes + "; repoint and pivot do not need the SLOT variable (the candidate builds no workload clusters). Default: the open transaction's"}},
				Action: slotArg(preflight, false)},
			{Name: "create", Description: "Examples:\n  kubectl bundle-slot create b\n  kubectl bundle-slot create b --package zarf-package-app-amd64-1.1.0.tar.zst\n  kubectl bundle-slot create b --seed charts/app:1.1=./app-1.1.tgz", Usage: "preflight, then build SLOT (each step recorded; a no-op when already built the same way)", ArgsUsage: "SLOT",
				Flags: []cli.Flag{pkgFlag, forceFlag("build"),
					&cli.StringSliceFlag{Name: "seed", Usage: "REF=PATH: push PATH (a directory as a Flux artifact, a Helm chart .tgz, an OCI layout; relative to the current directory) into the slot's registry as REF; repeatable; replaces config.yaml's seed: list"},
				}, Action: slotArg(create, true)},
			adoptCommand(slotArg(adopt, true)),
			{Name: "deploy", Description: "Examples:\n  kubectl bundle-slot deploy b zarf-package-app-amd64-1.1.0.tar.zst\n  kubectl bundle-slot deploy b sha256:DIGEST --timeout 15m", Usage: "zarf package deploy a verified, staged PACKAGE into SLOT", ArgsUsage: "SLOT PACKAGE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "key", Usage: "public key for zarf to check the signature with too (default the key kubectl bundle-verify --stage used)", TakesFile: true},
					&cli.BoolFlag{Name: "insecure", Usage: "deploy a package kubectl bundle-verify has not staged, or staged with --insecure-skip-signature (not recommended)"},
					&cli.DurationFlag{Name: "timeout", Usage: "how long zarf package deploy may take (default --zarf-deploy-timeout, 5m)"},
					forceFlag("deploy into"),
				}, Action: slotArg(deploy, true)},
			{Name: "destroy", Description: "Examples:\n  kubectl bundle-slot losses b\n  kubectl bundle-slot destroy b\n  kubectl bundle-slot destroy b --yes", Usage: "remove SLOT's cluster, registry, workload containers, contexts and record (idempotent); when it holds anything slot losses lists (workload clusters, PersistentVolumeClaims, registry content), list it and ask on a terminal, and without one refuse (exit 4) unless --yes", ArgsUsage: "SLOT",
				Flags: []cli.Flag{forceFlag("destroy"),
					&cli.BoolFlag{Name: "yes", Usage: "discard what the slot holds without listing it or asking (--force does only for a protected slot, whose override is said and recorded: it lists what is discarded)"}},
				Action: slotArg(destroy, true)},
			{Name: "losses", Description: "Examples:\n  kubectl bundle-slot losses b\n  kubectl bundle-slot losses b -o json --yes", Usage: "list what discarding SLOT loses (its workload clusters, its PersistentVolumeClaims with sizes, its registry's repositories and tags; best effort) and record it in the journal; when there is any, ask on a terminal, and without one refuse (exit 2) unless --yes", ArgsUsage: "SLOT",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "yes", Usage: "discard what is listed without asking"}},
				Action: slotArg(losses, true)},
			{Name: "repair", Description: "Examples:\n  kubectl bundle-slot repair a", Usage: "rebuild the damaged record of a protected SLOT (the active one, or the revert target of a soak) from the settings and the history, without touching its cluster", ArgsUsage: "SLOT",
				Action: slotArg(repair, true)},
			{Name: "list", Description: "Examples:\n  kubectl bundle-slot list\n  kubectl bundle-slot list -o json\n  kubectl bundle-slot list -o jsonpath='{[*].name}'", Usage: "every slot: provider, state, context, package, last gate, active", ArgsUsage: " ",
				Action: slotArg(list, false)},
			{Name: "describe", Description: "Examples:\n  kubectl bundle-slot describe a\n  kubectl bundle-slot describe a -o yaml", Usage: "one slot in full", ArgsUsage: "SLOT", Action: slotArg(describe, false)},
			workloadCommand(slotArg(workloadKubeconfig, false)),
			otherCommand(slotArg(other, false)),
		},
	})

}

const slotExamples = `Examples:
  kubectl bundle-slot list
  kubectl bundle-slot preflight b --package zarf-package-app-amd64-1.1.0.tar.zst
  kubectl bundle-slot describe a -o yaml`

// forceFlag overrides the protected-slot guard for verb.
func forceFlag(verb string) cli.Flag {
	return &cli.BoolFlag{Name: "force", Usage: "also " + verb + " a protected slot (the active one, or the previous one during a soak); said loudly and recorded in the history. Strategy scripts never need it"}
}

// Main runs the command with the real kind provider.
func Main(ctx context.Context, streams kcli.IOStreams, args []string) int {
	return MainWith(ctx, streams, args, Deps{})
}

// MainWith runs the command with deps (tests).
func MainWith(ctx context.Context, streams kcli.IOStreams, args []string, deps Deps) int {
	return kcli.Main(ctx, streams, args, func(st kcli.IOStreams) *cli.Command { return Command(st, deps) })
}

// settings maps config keys to their flags.
var settings = []struct{ key, usage string }{
	{"provider", ""}, // the registered providers' names
	{"clusterPrefix", "kind cluster name prefix (default airgap-mgmt)"},
	{"registryName", "registry container name prefix (default krops-registry-airgap)"},
	{"registryPortBase", "host port of slot index 0's registry (default 5002)"},
	{"registryImage", "registry image, loaded from the archives (default registry:3; NAME:TAG@sha256:ID pins its image ID)"},
	{"nodeImage", "kind node image, loaded from the archives (default kindest/node:v1.36.4; NAME:TAG@sha256:ID pins its image ID)"},
	{"dockerSocket", "Docker socket mounted into the node (default /var/run/docker.sock)"},
	{"zarfRegistry", "registry zarf init sets up: nodeport (zarf's own, from the init package; default) or slot (the slot's registry, as zarf's external registry; also named in the cluster as zarf's own registry, zarf/zarf-docker-registry, for pods such as Flux's)"},
	{"archives", "directory with the zarf init package and docker-save image archives (default ./archives)"},
	{"initPackageGlob", "init package file name pattern in --archives (default zarf-init-*-v*.tar.zst)"},
	{"zarfInitTimeout", "how long zarf init may take: zarf gets it as --timeout and is stopped when it overruns it (default 1m, the site's)"},
	{"zarfDeployTimeout", "how long zarf package deploy may take, as for init (default 5m, the site's; deploy --timeout overrides it)"},
}

func configFlags() []cli.Flag {
	var fs []cli.Flag
	for _, s := range settings {
		usage := s.usage
		if s.key == "provider" {
			usage = strings.Join(slot.ProviderNames(), " or ")
		}
		fs = append(fs, &cli.StringFlag{Name: flagName(s.key), Usage: usage + " [$" + slot.EnvVars[s.key] + "]"})
	}
	return append(fs,
		kubeflags.Kubeconfig("kubeconfig kind writes to, and existing contexts are read from"),
		&cli.StringFlag{Name: "context", Usage: "existing provider: the slot's kube context"},
		&cli.BoolFlag{Name: "init", Usage: "existing provider: run zarf init there too"},
	)
}

func flagName(key string) string {
	out := []rune{}
	for _, r := range key {
		if r >= 'A' && r <= 'Z' {
			out = append(out, '-', r+'a'-'A')
			continue
		}
		out = append(out, r)
	}
	return string(out)
}

type session struct {
	*statesession.Session
	streams kcli.IOStreams
	common  *kcli.Common
	dir     *state.Dir
	m       *slot.Manager
}

func (s *session) close() { s.Close() }

func open(ctx context.Context, streams kcli.IOStreams, cmd *cli.Command, deps Deps, mutate bool) (*session, error) {
	common, err := kcli.ParseCommon(cmd)
	if err != nil {
		return nil, err
	}
	log := common.Log(streams)
	ss, err := statesession.Open(statesession.Options{StateDir: common.StateDir, Mutate: mutate, Log: log})
	if err != nil {
		return nil, err
	}
	dir := ss.Dir
	flags := map[string]string{}
	for _, s := range settings {
		flags[s.key] = cmd.String(flagName(s.key))
	}
	cfg, err := slot.LoadConfig(dir.Join("config.yaml"), os.Getenv, flags)
	if err != nil {
		ss.Close()
		return nil, err
	}
	if ctxName := cmd.String("context"); ctxName != "" && cmd.Args().Len() > 0 {
		if cfg.Existing == nil {
			cfg.Existing = map[string]slot.ExistingSlot{}
		}
		cfg.Existing[cmd.Args().First()] = slot.ExistingSlot{Context: ctxName, Kubeconfig: cmd.String("kubeconfig"), Init: cmd.Bool("init")}
	}
	s := &session{Session: ss, streams: streams, common: common, dir: dir}
	kind := deps.Kind
	if kind == nil {
		kind = slot.KindLibrary{Log: log}
	}
	s.m = &slot.Manager{Dir: dir, Config: cfg, Run: runner.From(ctx), Kind: kind, Kubeconfig: cmd.String("kubeconfig"),
		Probe: deps.Probe, Sleep: deps.Sleep, Log: log, Step: os.Getenv(statesession.EnvStep)}
	if mutate {
		s.m.Journal = ss.Journal
	}
	return s, nil
}

func oneSlot(cmd *cli.Command) (string, error) {
	if cmd.Args().Len() != 1 {
		return "", kcli.Usage("%s takes one SLOT (e.g. a or b), got %d arguments", cmd.Name, cmd.Args().Len())
	}
	return cmd.Args().First(), nil
}

func packageBytes(s *session, cmd *cli.Command) (int64, error) {
	arg := cmd.String("package")
	if arg == "" {
		return 0, nil
	}
	p, err := stage.Resolve(s.dir, arg)
	var ns *stage.NotStagedError
	if errors.As(err, &ns) && ns.Ref.File != "" {
		return ns.Ref.Bytes, nil // sizing only: an unstaged file counts as it is
	}
	if err != nil {
		return 0, fmt.Errorf("--package: %w", err)
	}
	fi, err := os.Stat(p.Path)
	if err != nil {
		return 0, kcli.Environment(fmt.Errorf("--package: %w", err))
	}
	return fi.Size(), nil
}

// packagePath is the archive --package names: its staged copy, or the
// file itself when it is not staged (preflight only reads it).
func packagePath(s *session, cmd *cli.Command) (string, error) {
	arg := cmd.String("package")
	if arg == "" {
		return "", kcli.Usage("--blue-green checks a package: give it with --package DIGEST|PATH")
	}
	p, err := stage.Resolve(s.dir, arg)
	var ns *stage.NotStagedError
	if errors.As(err, &ns) && ns.Ref.File != "" {
		return ns.Ref.File, nil
	}
	if err != nil {
		return "", fmt.Errorf("--package: %w", err)
	}
	return p.Path, nil
}

func preflight(ctx context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	size, err := packageBytes(s, cmd)
	if err != nil {
		return err
	}
	rep, err := s.m.Preflight(ctx, name, size)
	if err != nil {
		return err
	}
	if cmd.Bool("blue-green") {
		path, err := packagePath(s, cmd)
		if err != nil {
			return err
		}
		mode := cmd.String("switch-mode")
		if !cmd.IsSet("switch-mode") {
			if t, err := site.ReadTxn(s.dir); err == nil && t != nil {
				mode = t.SwitchMode
			}
		}
		if mode, err = journal.ParseSwitchMode(mode); err != nil {
			return kcli.Usage("--switch-mode: %v", err)
		}
		s.m.PreflightBlueGreen(ctx, rep, path, mode)
	}
	if s.common.Output == kcli.OutputJSON {
		if err := kcli.WriteJSON(s.streams.Out, rep); err != nil {
			return err
		}
	} else if !s.common.Quiet {
		printFindings(s.streams.Out, rep)
	}
	if rep.Blocked {
		// The machine is what preflight checks: the same kind as create's refusal.
		return kcli.Reported(errkind.Environment)
	}
	return nil
}

func create(ctx context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	size, err := packageBytes(s, cmd)
	if err != nil {
		return err
	}
	if flags := cmd.StringSlice("seed"); len(flags) > 0 {
		entries := make([]seed.Entry, 0, len(flags))
		for _, f := range flags {
			ref, path, ok := strings.Cut(f, "=")
			if !ok || ref == "" || path == "" {
				return kcli.Usage("--seed %q: give REF=PATH (e.g. krops:latest=config-artifact)", f)
			}
			// A path on the command line is the shell's: relative to here.
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			entries = append(entries, seed.Entry{Ref: ref, Path: path})
		}
		s.m.Config.Seed = entries
	}
	// A ready slot is never rebuilt by create (same settings: nothing to do;
	// other settings: refused), so only a build touches a protected slot.
	if old, err := slot.Load(s.dir, name); err != nil || old.State != slot.StateReady {
		if err := s.Guard(name, statesession.Create, cmd.Bool("force")); err != nil {
			return err
		}
	} else if err := s.Check(); err != nil {
		// Nothing to build, but damage to the state is met as every
		// mutating command meets it: a "nothing to do" would hide it.
		return err
	}
	opts := slot.CreateOptions{PackageBytes: size, Package: cmd.String("package")}
	if cmd.String("package") != "" {
		// The slot's own names for the package's Flux artifacts, written
		// into the slot before the package is deployed.
		path, err := packagePath(s, cmd)
		if err != nil {
			return err
		}
		p, err := bluegreen.ReadFile(path)
		if err == nil {
			opts.Flux, err = p.SlotSettings(name)
		}
		if err != nil {
			return kcli.Usage("--package %s: reading its Flux artifacts for the slot's names: %v", cmd.String("package"), err)
		}
	}
	rec, err := s.m.Create(ctx, name, opts)
	var se *slot.SettingsError
	if errors.As(err, &se) {
		return s.settingsAdvice(se)
	}
	already := errors.Is(err, slot.ErrAlreadyCreated)
	var pe *slot.PreflightError
	if errors.As(err, &pe) && !s.common.Quiet && s.common.Output == kcli.OutputText {
		printFindings(s.streams.ErrOut, pe.Report)
	}
	if err != nil && !already {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, rec)
	}
	if s.common.Quiet {
		return nil
	}
	if errors.Is(err, slot.ErrFluxNamesWritten) {
		_, err = fmt.Fprintf(s.streams.Out, "slot %s already created; the package's Flux names written into it: %s\n", name, slot.FluxLine(rec.Flux))
		return err
	}
	if already {
		_, err = fmt.Fprintf(s.streams.Out, "slot %s already created with these settings: nothing to do\n", name)
		return err
	}
	_, err = fmt.Fprintf(s.streams.Out, "slot %s created: %s\n", name, slot.Summary(rec))
	return err
}

func deploy(ctx context.Context, cmd *cli.Command, s *session) error {
	if cmd.Args().Len() != 2 {
		return kcli.Usage("deploy takes SLOT and PACKAGE (a staged digest, or a path the verify plugin staged)")
	}
	name, pkg := cmd.Args().Get(0), cmd.Args().Get(1)
	if err := s.Guard(name, statesession.Deploy, cmd.Bool("force")); err != nil {
		return err
	}
	rec, err := s.m.Deploy(ctx, name, pkg, slot.DeployOptions{Insecure: cmd.Bool("insecure"), Key: cmd.String("key"), Timeout: cmd.Duration("timeout")})
	if err != nil {
		return s.captureFailure(ctx, name, rec, err)
	}
	if id := evidence.Current(s.dir); id != "" && rec.Package != nil {
		evidence.Warn(s.streams.ErrOut, "recording the deploy of slot "+name, evidence.KeepDeployed(s.dir, id, name, rec.Package.Digest))
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, rec)
	}
	if !s.common.Quiet {
		fmt.Fprintf(s.streams.Out, "deployed %s into slot %s\n", packageString(rec.Package), name)
	}
	return nil
}

// captureFailure captures what a failed zarf run left in slot name (a
// refusal before zarf ran captures nothing) and names the capture in err.
func (s *session) captureFailure(ctx context.Context, name string, rec *slot.Record, err error) error {
	var re *runner.RunError
	var te *slot.TimeoutError
	if !errors.As(err, &re) && !errors.As(err, &te) {
		return err
	}
	fmt.Fprintf(s.streams.ErrOut, "deploy into slot %s failed: capturing what the slot shows (each item at most %s and %d bytes)\n", name, capture.DefaultTimeout, capture.DefaultMaxBytes)
	path, cerr := capture.ForSlot(ctx, s.dir, capture.Failure{What: "deploy", Slot: name, Record: rec, Config: s.m.Config, Run: s.m.Run})
	if path == "" {
		evidence.Warn(s.streams.ErrOut, "debug capture", cerr)
		return err
	}
	evidence.Warn(s.streams.ErrOut, "debug capture", cerr)
	return fmt.Errorf("%w\ndebug capture: %s", err, path)
}

func destroy(ctx context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	// A protected slot destroyed with --force: the override, said and
	// recorded by the guard, is the operator's word for what it holds too.
	forced := false
	if cmd.Bool("force") {
		if p, err := s.Protection(); err == nil && p.Why(name) != "" {
			forced = true
		}
	}
	if err := s.Guard(name, statesession.Destroy, cmd.Bool("force")); err != nil {
		return err
	}
	if !cmd.Bool("force") {
		// A damaged record says nothing true of what the slot holds: its
		// repair (destroy --force, or repair for a protected slot) is
		// named, as every command that meets damage names it.
		if _, err := s.LoadSlot(name); errors.As(err, new(*slot.DamagedError)) {
			return err
		}
	}
	if !cmd.Bool("yes") {
		if err := s.confirmDestroy(ctx, name, forced); err != nil {
			return err
		}
	} else if !cmd.Bool("force") {
		// --yes answers the question, not the refusal: workload clusters
		// the destroy would leave running, owned by nothing.
		if err := s.refuseUnnamed(ctx, name); err != nil {
			return err
		}
	}
	// --force also destroys a slot whose context reaches another cluster
	// than its record names (the record goes; an existing cluster stays).
	s.m.SkipClusterCheck = cmd.Bool("force")
	if err := s.m.Destroy(ctx, name); err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, map[string]any{"slot": name, "destroyed": true})
	}
	if !s.common.Quiet {
		fmt.Fprintf(s.streams.Out, "slot %s destroyed\n", name)
	}
	return nil
}

// repair rebuilds the damaged record of a protected slot: the repair that
// keeps the slot (destroy --force is the one for any other slot).
func repair(ctx context.Context, cmd *cli.Command, s *session) error {
	name, err := oneSlot(cmd)
	if err != nil {
		return err
	}
	_, err = slot.Load(s.dir, name)
	missing := errors.As(err, new(*slot.NotFoundError))
	if err == nil {
		if !s.common.Quiet {
			fmt.Fprintf(s.streams.Out, "the record of slot %s reads fine: nothing to repair\n", name)
		}
		return nil
	} else if !missing && !errors.As(err, new(*slot.DamagedError)) {
		return err
	}
	// The pointer and the switch record say which slots are kept; damage
	// to them is repaired first (their own repair is printed), but the
	// pointer alone decides for the active slot. A missing record is
	// rebuilt for any slot the machine runs: what runs is then known again.
	protected := missing
	if !missing {
		if protected, err = site.Read(s.dir).ProtectsRecord(name); err != nil {
			return err
		}
	}
	if !protected {
		return errkind.New(errkind.Conflict, "slot %s is not protected (neither the active slot nor the revert target of a soak), so its damaged record is not rebuilt: clear it and what its slot left with %s", name, s.dir.Plugin("slot", "destroy", name, "--force"))
	}
	rep, err := s.m.RepairRecord(ctx, name)
	if err != nil {
		return err
	}
	if s.common.Output == kcli.OutputJSON {
		return kcli.WriteJSON(s.streams.Out, rep)
	}
	if s.common.Quiet {
		return nil
	}
	pkg := "unknown (no deploy of a still staged package in the history): deploy the known-good package again before a recreate (" + s.dir.Plugin("slot", "deploy", name, "PACKAGE", "--force").String() + ")"
	if rep.Record.Package != nil {
		pkg = packageString(rep.Record.Package) + ", from " + rep.PackageFrom
	}
	from := "the settings"
	if rep.FromHistory {
		from = "the history's record of what it was built as"
	}
	if missing {
		fmt.Fprintf(s.streams.Out, "slot %s: record rebuilt from what runs (%s) and %s (%s); its cluster was not touched\n", name, strings.Join(rep.Running, ", "), from, slot.Summary(rep.Record))
	} else {
		fmt.Fprintf(s.streams.Out, "slot %s: record rebuilt from %s (%s); its cluster was not touched\n", name, from, slot.Summary(rep.Record))
	}
	if len(rep.Record.OwnsWorkloads) > 0 {
		fmt.Fprintln(s.streams.Out, rep.Record.OwnsWorkloadsLine())
	}
	fmt.Fprintf(s.streams.Out, "package: %s\n", pkg)
	if rep.Aside != "" {
		fmt.Fprintf(s.streams.Out, "the damaged record is kept at %s\n", rep.Aside)
	}
	fmt.Fprintf(s.streams.Out, "its gate result was lost: run %s\n", s.dir.Plugin("gate", "--slot", name, "--record"))
	return nil
}

// settingsAdvice is create's refusal of a ready slot with other settings,
// with advice that works: a protected slot is not destroyed to be rebuilt
// (the guard refuses it), so its settings change through a new slot or the
// strategy that owns rebuilding it, or --force, said loudly.
func (s *session) settingsAdvice(se *slot.SettingsError) error {
	p, err := s.Protection()
	if err != nil {
		return err
	}
	why := p.Why(se.Slot)
	if why == "" {
		return se
	}
	other := "b"
	if se.Slot == "b" {
		other = "a"
	}
	var how string
	if se.Slot == p.Soaking {
		how = fmt.Sprintf("end the soak first (%s retires it; %s makes it active again), then change its settings as for any slot", s.dir.Plugin("switch", "accept"), s.dir.Plugin("switch", "back"))
	} else {
		how = fmt.Sprintf("to serve with the new settings, build them in another slot and switch to it (blue-green: %s apply PACKAGE --key KEY, with the new settings in %s or the KUBECTL_BUNDLE_* variables; it builds slot %s), "+
			"or rebuild this slot with them through a recreate update (%s PACKAGE --key KEY tears it down and rebuilds it, with the package deployed now as the fallback)",
			journal.ScriptPath(journal.BlueGreen), s.dir.Join("config.yaml"), other, journal.ScriptPath(journal.Recreate))
	}
	return errkind.New(errkind.Conflict, "slot %s exists with other settings (provider %s, context %s) and is protected: %s, so it is not destroyed to be rebuilt; %s; "+
		"or, losing what it serves, destroy it anyway: %s (WARNING: said and recorded in the history)",
		se.Slot, se.Provider, se.Context, why, how, s.dir.Plugin("slot", "destroy", se.Slot, "--force"))
}
