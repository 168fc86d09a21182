package slot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/stage"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Slot states recorded in Record.State (record's, named here too).
const (
	StateCreating   = record.StateCreating
	StateReady      = record.StateReady
	StateFailed     = record.StateFailed
	StateDestroying = record.StateDestroying
)

// Manager builds, deploys and destroys slots. The cmd layer holds the
// state dir's lock around every mutating call.
type Manager struct {
	Dir    *state.Dir
	Config *Config
	// Run runs docker and zarf.
	Run runner.Runner
	// Kind creates kind clusters (the kind library, or a test fake).
	Kind ClusterProvider
	// Kubeconfig is the file kind writes contexts into ("" : kubectl's default).
	Kubeconfig string
	// Probe GETs a registry's /v2/ through its published port.
	Probe func(ctx context.Context, url string) error
	// RegistryAddr is where this host reaches a slot's registry published
	// on port (default 127.0.0.1:PORT); tests name an in-process registry.
	RegistryAddr func(port int) string
	// Sleep waits between registry health polls.
	Sleep func(time.Duration)
	// WriteRegistryService gives the slot's registry its in-cluster name
	// (zarfRegistry slot; registrysvc.go): nil writes it with client-go.
	WriteRegistryService func(ctx context.Context, kubeconfig, kubeContext, ip, slotName string) error
	// Log receives one line per step.
	Log io.Writer
	// Journal, when set, records every step in the history.
	Journal *journal.Journal
	// SkipClusterCheck: destroy does not check that the slot still
	// reaches the cluster its record names (destroy --force).
	SkipClusterCheck bool
	// Step is the transaction step this command runs as (TXN/PHASE, from
	// journal run; "" when run by hand): every event it records names it,
	// so that journal run can tell the plugin did the step.
	Step string
}

func (m *Manager) logf(format string, args ...any) {
	if m.Log != nil {
		fmt.Fprintf(m.Log, format+"\n", args...)
	}
}

func (m *Manager) record(slotName, detail, status string, err error) {
	if m.Journal == nil {
		return
	}
	ev := journal.Event{Type: "slot", Slot: slotName, Detail: detail, Status: status, Step: m.Step}
	if err != nil {
		ev.Error = err.Error()
	}
	if jerr := m.Journal.Record(ev); jerr != nil {
		m.logf("warning: recording %s %s in the journal: %v", detail, status, jerr)
	}
}

// step runs one recorded provider step of op on rec.
func (m *Manager) step(rec *Record, op, name string, fn func() error) error {
	detail := op + "/" + name
	m.logf("slot %s: %s", rec.Name, detail)
	err := journal.RunStep(m.Journal.EventStep(journal.Event{Type: "slot", Slot: rec.Name, Detail: detail, Step: m.Step}), func() error {
		state.CrashPoint("slot:" + detail)
		if err := fn(); err != nil {
			return err
		}
		rec.Steps = append(rec.Steps, StepRecord{Name: detail, Done: true, Finished: time.Now().UTC()})
		return Save(m.Dir, rec)
	})
	if err != nil {
		if op == "create" {
			rec.State = StateFailed
			_ = Save(m.Dir, rec)
		}
		return fmt.Errorf("slot %s: %s: %w", rec.Name, detail, err)
	}
	return nil
}

// CreateOptions are the inputs of create beyond the config.
type CreateOptions struct {
	// PackageBytes sizes the disk check (the package to deploy next).
	PackageBytes int64
	// Flux are the slot's values of the package's Flux variables
	// (bluegreen.Package.SlotSettings), written before the deploy.
	Flux []record.FluxSetting
	// Package is the package as the operator named it, for advice.
	Package string
}

// inputs is what makes two creates "the same": a slot created with other
// inputs must be destroyed before it is created again.
func (m *Manager) inputs(p Provider, n *Names) string {
	parts := []string{p.Name(), n.Cluster, n.Context, n.Registry, strconv.Itoa(n.RegistryPort)}
	parts = append(parts, p.Inputs(m, n)...)
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// ErrAlreadyCreated is returned (wrapped in nothing) when create finds the
// slot already built with the same inputs: a no-op.
var ErrAlreadyCreated = errors.New("already created")

// ErrFluxNamesWritten is ErrAlreadyCreated where create wrote the
// package's Flux names into the slot, which it was created without.
var ErrFluxNamesWritten = fmt.Errorf("%w; the package's Flux names written", ErrAlreadyCreated)

// ConflictError is a slot that exists with other settings, or the active
// slot asked to be destroyed.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// ErrorKind: a conflict.
func (e *ConflictError) ErrorKind() errkind.Kind { return errkind.Conflict }

// SettingsError is a ready slot asked to be created with other settings:
// create never rebuilds a ready slot.
type SettingsError struct {
	Slot, Provider, Context string
	// Destroy is the command that clears the slot first.
	Destroy advice.Cmd
}

func (e *SettingsError) Error() string {
	return fmt.Sprintf("slot %s exists with other settings (provider %s, context %s): destroy it first (%s)", e.Slot, e.Provider, e.Context, e.Destroy)
}

// ErrorKind: a conflict.
func (e *SettingsError) ErrorKind() errkind.Kind { return errkind.Conflict }

// Create builds slotName: preflight, then the provider's steps, each
// recorded. Created with the same inputs already: ErrAlreadyCreated. Left
// half-built by a crash or failure: destroyed and rebuilt.
func (m *Manager) Create(ctx context.Context, slotName string, o CreateOptions) (*Record, error) {
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	p, err := m.provider()
	if err != nil {
		return nil, err
	}
	in := m.inputs(p, n)
	old, err := Load(m.Dir, slotName)
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		old = nil
	case err != nil:
		return nil, err
	}
	if old != nil {
		switch {
		case old.State == StateReady && old.Inputs == in && len(o.Flux) > 0 && !slices.Equal(old.Flux, o.Flux):
			// Created before without this package (by hand, or with
			// another): its Flux names are written now, before the deploy
			// that needs them, or a deploy would take the default, the
			// other slot's name. Not into a slot that holds a package: its
			// Flux reconciles names already, and at the next reconcile it
			// would make the clusters of the new names and delete those it
			// made (with Cluster API running, the workload clusters).
			if old.Package != nil || old.Deploying != nil {
				// The way on: a slot that holds no package. This one
				// rebuilt when nothing needs it; the other one when this
				// one serves or is kept to go back to (never destroyed).
				pkg := o.Package
				if pkg == "" {
					pkg = "PACKAGE"
				}
				way := fmt.Sprintf("build the update in a slot that holds no package (%s, then %s)", m.Dir.Plugin("slot", "destroy", slotName), m.Dir.Plugin("slot", "create", slotName, "--package", pkg))
				if protected, perr := site.Read(m.Dir).Protects(slotName); perr != nil || protected {
					way = fmt.Sprintf("slot %s serves or is kept to go back to, so it stays: build the update in the other slot, as blue/green does (%s)", slotName, m.Dir.Plugin("slot", "preflight", m.otherSlot(slotName), "--blue-green", "--package", pkg))
				}
				return old, errkind.New(errkind.Conflict, "slot %s holds a package (its Flux reconciles its names: %s): writing the names %s would have Flux delete the workload clusters it made and make others; nothing was changed; %s, or deploy into this one as it is",
					slotName, fluxOrDefaults(old.Flux), FluxLine(o.Flux), way)
			}
			if err := m.step(old, "create", "flux-names", func() error { return m.writeFluxSettings(ctx, old, o.Flux) }); err != nil {
				return old, err
			}
			old.Flux = o.Flux
			if err := Save(m.Dir, old); err != nil {
				return nil, err
			}
			m.logf("slot %s: already created; the package's Flux names written: %s", slotName, FluxLine(o.Flux))
			return old, ErrFluxNamesWritten
		case old.State == StateReady && old.Inputs == in:
			if m.Step != "" {
				// The step's proof that this slot is the one it built.
				m.record(slotName, DetailAlreadyCreated, journal.StatusDone, nil)
			}
			return old, ErrAlreadyCreated
		case old.State == StateReady:
			return nil, &SettingsError{Slot: slotName, Provider: old.Provider, Context: old.Context, Destroy: m.Dir.Plugin("slot", "destroy", slotName)}
		default:
			m.logf("slot %s: recorded as %s, not finished: destroying it to rebuild from a clean state", slotName, old.State)
			if err := m.Destroy(ctx, slotName); err != nil {
				return nil, fmt.Errorf("cleaning up the unfinished slot %s: %w", slotName, err)
			}
		}
	}
	pre, err := m.Preflight(ctx, slotName, o.PackageBytes)
	if err != nil {
		return nil, err
	}
	if pre.Blocked {
		return nil, &PreflightError{Report: pre}
	}
	rec := &Record{Name: slotName, Provider: p.Name(), Context: n.Context, State: StateCreating,
		Created: time.Now().UTC(), Inputs: in}
	p.NewRecord(m, rec, n)
	if err := Save(m.Dir, rec); err != nil {
		return nil, err
	}
	m.recordIdentity(rec, "create", "started")
	if err := p.Create(ctx, m, rec, n); err != nil {
		return rec, err
	}
	if len(o.Flux) > 0 {
		if err := m.step(rec, "create", "flux-names", func() error { return m.writeFluxSettings(ctx, rec, o.Flux) }); err != nil {
			return rec, err
		}
		rec.Flux = o.Flux
	}
	rec.State = StateReady
	if err := Save(m.Dir, rec); err != nil {
		return nil, err
	}
	m.recordIdentity(rec, "create", "done")
	return rec, nil
}

func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// zarf runs zarf against the slot's cluster only.
func (m *Manager) zarf(ctx context.Context, slotName string, args ...string) error {
	if err := m.ensureSlotKubeconfig(slotName); err != nil {
		return err
	}
	r := runner.WithEnv(m.Run, "KUBECONFIG="+KubeconfigPath(m.Dir, slotName))
	// Plain output: its last lines end up in our error message and the log.
	_, err := r.Run(ctx, "zarf", append(args, "--no-color")...)
	return err
}

// slotRegistryUser is the user name (and password) zarf is given for a
// slot's registry, which does not check them.
const slotRegistryUser = "kubectl-bundle"

// zarfWithin runs zarf with --timeout d (zarf's own wait for health checks
// and Helm) and stops it when it overruns d by a tenth (at most 30s more),
// so that a hung zarf cannot hold a strategy forever. setting names the
// configuration key that chose d.
func (m *Manager) zarfWithin(ctx context.Context, slotName string, d time.Duration, setting string, args ...string) error {
	if d <= 0 {
		return m.zarf(ctx, slotName, args...)
	}
	args = append(args, "--timeout", d.String())
	ctx, cancel := context.WithTimeout(ctx, d+min(d/10, 30*time.Second))
	defer cancel()
	err := m.zarf(ctx, slotName, args...)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		what := "zarf " + args[0]
		if args[0] == "package" {
			what += " " + args[1]
		}
		return &TimeoutError{What: what, Timeout: d, Setting: setting, Err: err}
	}
	return err
}

// TimeoutError is zarf stopped for overrunning its timeout.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	Setting string
	Err     error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s did not finish within %s and was stopped (%s in the state dir's config.yaml, or --%s): %v", e.What, e.Timeout, e.Setting, flagName(e.Setting), e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// ErrorKind: a tool that hangs is the environment's failure.
func (e *TimeoutError) ErrorKind() errkind.Kind { return errkind.Environment }

func (m *Manager) zarfInit(ctx context.Context, slotName, initPkg string, registryPort int) error {
	d := m.Config.Duration("zarfInitTimeout")
	if m.Config.ZarfRegistry == ZarfRegistrySlot && registryPort > 0 {
		// The slot's registry has no authentication (it listens on the
		// host's loopback and the kind network only); zarf insists on
		// push credentials for an external registry, and the registry
		// ignores them.
		return m.zarfWithin(ctx, slotName, d, "zarfInitTimeout", "init", initPkg, "--registry-mode=external",
			"--registry-url=127.0.0.1:"+strconv.Itoa(registryPort),
			"--registry-push-username="+slotRegistryUser, "--registry-push-password="+slotRegistryUser,
			"--components=", "--confirm")
	}
	return m.zarfWithin(ctx, slotName, d, "zarfInitTimeout", "init", initPkg, "--registry-mode=nodeport", "--components=", "--confirm")
}

// DeployOptions tune deploy.
type DeployOptions struct {
	// Insecure deploys a package that verify has not staged.
	Insecure bool
	// Key is passed to zarf so that it checks the signature too.
	Key string
	// Timeout bounds zarf package deploy (0: the config's zarfDeployTimeout).
	Timeout time.Duration
}

// deployable is the package deploy hands zarf.
type deployable struct {
	Digest, Path, Name, Version string
	// Key is the public key verify checked the signature with.
	Key string
}

// resolve finds what deploy hands zarf: a staged package (a digest, or the
// path or .part000 it was staged from), refused when it is unverified,
// unsigned or no longer the bytes verified, unless --insecure; with
// --insecure, an unstaged file as it is.
func (m *Manager) resolve(slotName, pkg string, insecure bool) (*deployable, error) {
	p, err := stage.Resolve(m.Dir, pkg)
	var ns *stage.NotStagedError
	if errors.As(err, &ns) && ns.Ref.File != "" {
		if !insecure {
			return nil, &NotVerifiedError{Path: pkg, Verify: stage.VerifyCommand(m.Dir, pkg, m.Config.Verify.Keyless())}
		}
		m.logf("warning: deploying %s without verification (--insecure)", pkg)
		return &deployable{Digest: ns.Ref.Digest, Path: ns.Ref.File}, nil
	}
	if err != nil {
		return nil, err
	}
	r := &p.Record
	switch {
	case !r.Report.Verified && !insecure:
		return nil, &NotVerifiedError{Path: pkg, Verify: stage.VerifyCommand(m.Dir, pkg, m.Config.Verify.Keyless())}
	case r.IsUnsigned() && !insecure:
		src := r.Source
		if src == "" {
			src = r.Report.Path
		}
		return nil, errkind.New(errkind.Negative, "package %s was staged with --insecure-skip-signature: its integrity was checked, but no signature, so nobody vouches for it. "+
			"Deploy it anyway with %s, or stage it signed: %s --key KEY", pkg, m.Dir.Plugin("slot", "deploy", slotName, pkg, "--insecure"), m.Dir.Plugin("verify", "--stage", src))
	case r.IsUnsigned():
		m.logf("warning: deploying %s, whose signature was not checked (--insecure)", p.Path)
	case !r.Report.Verified:
		m.logf("warning: deploying %s without verification (--insecure)", p.Path)
	}
	// The staged copy is what zarf reads: it must still be the bytes verified.
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &deployable{Digest: p.Digest, Path: p.Path, Name: r.Report.Package.Name, Version: r.Report.Package.Version, Key: r.Key}, nil
}

// NotVerifiedError is a package verify has not accepted; Verify is the
// command that verifies and stages it.
type NotVerifiedError struct {
	Path   string
	Verify advice.Cmd
}

func (e *NotVerifiedError) Error() string {
	return fmt.Sprintf("package %s has not been verified and staged: run %s first (or pass --insecure to deploy it unverified)", e.Path, e.Verify)
}

// ErrorKind: refusing an unverified package is a negative verdict.
func (e *NotVerifiedError) ErrorKind() errkind.Kind { return errkind.Negative }

// Deploy runs zarf package deploy of a staged package against the slot's
// cluster and records it in the slot's record.
func (m *Manager) Deploy(ctx context.Context, slotName, pkg string, o DeployOptions) (*Record, error) {
	rec, err := Load(m.Dir, slotName)
	if err != nil {
		return nil, err
	}
	if rec.State != StateReady {
		return nil, &ConflictError{fmt.Sprintf("slot %s is %s, not ready: %s finishes it", slotName, rec.State, m.Dir.Plugin("slot", "create", slotName))}
	}
	st, err := m.resolve(slotName, pkg, o.Insecure)
	if err != nil {
		return nil, err
	}
	// The package is what was asked for; the slot must still be its cluster.
	if err := m.CheckCluster(ctx, rec, "deploy into"); err != nil {
		return nil, err
	}
	n, err := m.Config.NamesFor(slotName)
	if err != nil {
		return nil, err
	}
	args := []string{"package", "deploy", st.Path, "--confirm"}
	if o.Key == "" && st.Key != "" {
		// zarf checks the signature too, with the key verify used.
		if _, err := os.Stat(st.Key); err == nil {
			o.Key = st.Key
		}
	}
	if o.Key != "" {
		args = append(args, "--key", o.Key)
	}
	if o.Timeout <= 0 {
		o.Timeout = m.Config.Duration("zarfDeployTimeout")
	}
	keys := make([]string, 0, len(n.Variables))
	for k := range n.Variables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--set-variables", k+"="+n.Variables[k])
	}
	// From here on what the slot holds is not known until the deploy
	// finishes: its gate result stops vouching for it first (a failed or
	// killed deploy leaves it so, until a gate passes again).
	rec.Deploying = &DeployAttempt{Digest: st.Digest, Started: time.Now().UTC()}
	if err := Save(m.Dir, rec); err != nil {
		return nil, err
	}
	if err := m.step(rec, "deploy", st.Digest[:12], func() error {
		return m.zarfWithin(ctx, slotName, o.Timeout, "zarfDeployTimeout", args...)
	}); err != nil {
		rec.Deploying.Failed, rec.Deploying.Error = time.Now().UTC(), err.Error()
		if serr := Save(m.Dir, rec); serr != nil {
			m.logf("warning: recording the failed deploy in the record of slot %s: %v", slotName, serr)
		}
		prev := "none"
		if rec.Package != nil {
			prev = rec.Package.Digest
		}
		return rec, fmt.Errorf("%w\nthe slot's record still names its previous package (%s), but what the slot holds is not known: its last gate no longer counts until one passes again; %s shows the cluster's state and records it", err, prev, m.Dir.Plugin("gate", "--slot", slotName, "--record"))
	}
	rec.Package = &PackageRef{Digest: st.Digest, Name: st.Name, Version: st.Version, Deployed: time.Now().UTC()}
	rec.Deploying = nil
	// A gate result was for the package deployed before.
	rec.Gate = nil
	if err := Save(m.Dir, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// Destroy removes everything of slotName: its kind cluster and contexts,
// registry container, CAPD workload containers, kubeconfig and record.
// Idempotent: what is already gone is skipped. An existing-provider slot's
// cluster is left alone: only the record is dropped. It does not ask whether
// the slot is protected: the command layer's session guard does first.
func (m *Manager) Destroy(ctx context.Context, slotName string) error {
	n, err := m.NamesOf(slotName)
	if err != nil {
		return err
	}
	rec, err := Load(m.Dir, slotName)
	var nf *NotFoundError
	var dmg *DamagedError
	var p Provider
	if errors.As(err, &nf) || errors.As(err, &dmg) {
		// No record, or one whose content is not trusted: clean up what the
		// history says the slot was built as, else what the configured
		// provider would have built under the slot's names.
		if dmg != nil {
			// A record replaced by a directory is kept aside: the steps
			// below write the slot's record where it was.
			if _, err := state.SetAsideIfNotFile(dmg.Path); err != nil {
				return err
			}
		}
		if rec = m.historyRecord(slotName); rec != nil {
			if p, err = recordProvider(rec); err != nil {
				return err
			}
		} else {
			if p, err = m.provider(); err != nil {
				return err
			}
			rec = &Record{Name: slotName, Provider: p.Name(), Cluster: n.Cluster, Registry: n.Registry, Kubeconfig: m.Kubeconfig}
			p.NewRecord(m, rec, n)
		}
	} else if err != nil {
		return err
	} else {
		if p, err = recordProvider(rec); err != nil {
			return err
		}
		if rec.State == StateReady && !m.SkipClusterCheck {
			if err := m.CheckCluster(ctx, rec, "destroy"); err != nil {
				return err
			}
		}
		rec.State = StateDestroying
		if err := Save(m.Dir, rec); err != nil {
			return err
		}
	}
	if err := p.Destroy(ctx, m, rec, n); err != nil {
		return err
	}
	if err := removeSlotKubeconfig(m.Dir, slotName); err != nil {
		return err
	}
	state.CrashPoint("slot:destroy/record")
	if err := os.Remove(path(m.Dir, slotName)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := state.SyncDir(m.Dir.Join("slots")); err != nil && !os.IsNotExist(err) {
		return err
	}
	m.record(slotName, "destroy", "done", nil)
	return nil
}
