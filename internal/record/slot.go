package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// RecordKind identifies a slot record file.
const (
	RecordAPIVersion = "kubectl-bundle.dev/v1alpha1"
	RecordKind       = "Slot"
)

// Slot is slots/<name>.json: a slot's record.
type Slot struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Provider is kind or existing.
	Provider string `json:"provider"`
	// Cluster is the kind cluster's name (kind provider).
	Cluster string `json:"cluster,omitempty"`
	// Context is the kube context that reaches the slot's cluster.
	Context string `json:"context"`
	// Kubeconfig is the file holding Context ("" : kubectl's default rules).
	Kubeconfig   string      `json:"kubeconfig,omitempty"`
	Registry     string      `json:"registry,omitempty"`
	RegistryPort int         `json:"registryPort,omitempty"`
	Package      *PackageRef `json:"package,omitempty"`
	Gate         *GateResult `json:"gate,omitempty"`
	// Deploying is a deploy into the slot that started and did not finish
	// (it failed, was killed, or still runs): what the slot holds is not
	// known, so Gate no longer vouches for it until a gate passes again
	// (gate --record clears it) or a deploy finishes.
	Deploying *DeployAttempt `json:"deploying,omitempty"`
	State     string         `json:"state,omitempty"`
	// Inputs is a digest of the settings create used (same inputs: no-op).
	Inputs  string       `json:"inputs,omitempty"`
	Created time.Time    `json:"created,omitzero"`
	Steps   []StepRecord `json:"steps,omitempty"`
	// Seeded is what create pushed into the slot's registry (or found
	// there already), by digest.
	Seeded []seed.Result `json:"seeded,omitempty"`
	// Flux are the values create gave the package's Flux variables in
	// this slot (the ConfigMap kubectl-bundle-slot of each namespace): the
	// names of its own that its Flux gives its workload clusters.
	Flux []FluxSetting `json:"flux,omitempty"`
	// Adopted marks a site built before the slots and registered by
	// kubectl bundle-slot adopt: its cluster, registry and workload
	// clusters keep the site's own names (Cluster, Registry,
	// RegistryPort, Workloads), not names derived from the slot's.
	Adopted bool `json:"adopted,omitempty"`
	// Workloads are an adopted slot's CAPD workload clusters (unsuffixed).
	Workloads []string `json:"workloads,omitempty"`
	// OwnsWorkloads are the workload clusters this slot still runs after
	// an S1 (repoint) update moved the active pointer away from it: the
	// slot is kept for them and is not destroyed while it owns any.
	OwnsWorkloads []string `json:"ownsWorkloads,omitempty"`
	// ClusterID is the identity of the slot's cluster, recorded at create
	// (or by the first check of a record written before identities):
	// every deploy, switch and destroy checks that the slot still reaches
	// it, and no two slots may have one.
	ClusterID *ClusterID `json:"clusterID,omitempty"`
	// MovedIn are workload clusters whose Cluster API objects an S3 pivot
	// moved into this slot's management cluster: this slot's providers
	// manage their containers now, so they are this slot's (its destroy
	// removes them, its losses list them), whatever slot named them.
	MovedIn []string `json:"movedInWorkloads,omitempty"`
	// MovedOut are workload clusters of this slot's names whose objects a
	// pivot moved to another slot: no longer this slot's (its destroy
	// leaves their containers running, its losses do not list them).
	MovedOut []string `json:"movedOutWorkloads,omitempty"`
}

// ClusterID is what makes a cluster the one it is, whatever a context
// calls it: for the existing provider the API server's URL and the UID of
// its kube-system namespace (created once with the cluster: another
// cluster, or the same one rebuilt, has another); for kind the node
// container's ID.
type ClusterID struct {
	Server        string `json:"server,omitempty"`
	KubeSystemUID string `json:"kubeSystemUID,omitempty"`
	NodeContainer string `json:"nodeContainer,omitempty"`
}

// Same reports whether c and o name one cluster: the same kube-system
// UID, or the same node container (the server may be reached under
// another URL).
func (c *ClusterID) Same(o *ClusterID) bool {
	if c == nil || o == nil {
		return false
	}
	return (c.KubeSystemUID != "" && c.KubeSystemUID == o.KubeSystemUID) ||
		(c.NodeContainer != "" && c.NodeContainer == o.NodeContainer)
}

// String names the cluster in a message.
func (c *ClusterID) String() string {
	if c == nil {
		return "an unknown cluster"
	}
	if c.NodeContainer != "" {
		return "node container " + c.NodeContainer[:min(12, len(c.NodeContainer))]
	}
	return fmt.Sprintf("%s (kube-system UID %s)", c.Server, c.KubeSystemUID)
}

// OwnsWorkloadsLine is how list and status name the workload clusters a
// slot owns ("" when none).
func (r *Slot) OwnsWorkloadsLine() string {
	if len(r.OwnsWorkloads) == 0 {
		return ""
	}
	return fmt.Sprintf("slot %s owns workload clusters: %s", r.Name, strings.Join(r.OwnsWorkloads, ", "))
}

// PackageRef is the package deployed into a slot.
type PackageRef struct {
	Digest   string    `json:"digest"`
	Name     string    `json:"name,omitempty"`
	Version  string    `json:"version,omitempty"`
	Deployed time.Time `json:"deployed"`
}

// DeployAttempt is a deploy into a slot, recorded before zarf touches the
// cluster and kept until the deploy finishes.
type DeployAttempt struct {
	Digest  string    `json:"digest"`
	Started time.Time `json:"started"`
	// Failed is when the deploy failed; zero while it did not finish (it
	// was killed, or still runs).
	Failed time.Time `json:"failed,omitzero"`
	Error  string    `json:"error,omitempty"`
}

// Describe says what became of the deploy, e.g. "deploy of 34cafc06f5db
// failed 2026-01-02T03:04:05Z".
func (a *DeployAttempt) Describe() string {
	d := a.Digest
	if len(d) > 12 {
		d = d[:12]
	}
	if !a.Failed.IsZero() {
		return fmt.Sprintf("deploy of %s failed %s", d, a.Failed.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("deploy of %s did not finish (started %s)", d, a.Started.UTC().Format(time.RFC3339))
}

// Equal reports whether a and b are the same attempt in the same state
// (both nil: no attempt).
func (a *DeployAttempt) Equal(b *DeployAttempt) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Digest == b.Digest && a.Started.Equal(b.Started) && a.Failed.Equal(b.Failed)
}

// GateResult is the last gate run recorded for a slot.
type GateResult struct {
	Gate     string    `json:"gate"`
	Passed   bool      `json:"passed"`
	TimedOut bool      `json:"timedOut,omitempty"`
	Time     time.Time `json:"time"`
	Failed   []string  `json:"failed,omitempty"`
	// Package is the digest deployed when the gate ran, so a pass cannot
	// be carried over to a different package.
	Package string `json:"package,omitempty"`
	// File is the gate file that ran (absolute; "" for the built-in gate,
	// "-" for stdin), and Digest the sha256 of its bytes: a re-run can
	// tell it met the same gate again.
	File   string `json:"file,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// StepRecord is one provider step of create, for idempotent re-runs.
type StepRecord struct {
	Name     string    `json:"name"`
	Done     bool      `json:"done"`
	Finished time.Time `json:"finished,omitzero"`
}

// DamagedError is a slot record that cannot be read or is not the record
// of its slot: its content is not trusted. destroy --force clears it and
// what its slot left; the record of a protected slot (the active one, or
// the revert target of a soak) is rebuilt instead by repair, which leaves
// the slot's cluster alone.
type DamagedError struct {
	Name, Path string
	Err        error
	// Protected is set by whoever knows the slot is protected: its repair
	// must keep the slot.
	Protected bool
	// Env is the state dir's entry for a printed command (state.Dir.CommandEnv).
	Env string
}

func (e *DamagedError) Error() string {
	if e.Protected {
		return fmt.Sprintf("the record of slot %s (%s) is damaged: %v; rebuild it without touching the slot: %s", e.Name, e.Path, e.Err, e.Repair())
	}
	return fmt.Sprintf("the record of slot %s (%s) is damaged: %v; clear it and what its slot left: %s", e.Name, e.Path, e.Err, e.Repair())
}

// Repair is what repairs the damaged record: repair for a protected slot
// (kept), destroy --force for any other.
func (e *DamagedError) Repair() advice.Fix {
	if e.Protected {
		return advice.Do(Repair(e.Name).WithEnv(e.Env))
	}
	return advice.Do(advice.Plugin("slot", "destroy", e.Name, "--force").WithEnv(e.Env))
}

// Repair rebuilds the damaged record of slot name from the settings and
// the history, leaving its cluster alone (the state dir's entry is the
// caller's: state.Dir.Plugin, WithEnv).
func Repair(name string) advice.Cmd { return advice.Plugin("slot", "repair", name) }

// RepairOf is Repair for the state dir d.
func RepairOf(d *state.Dir, name string) advice.Cmd { return d.Plugin("slot", "repair", name) }

// ErrorKind: a damaged record is state that does not allow the step.
func (e *DamagedError) ErrorKind() errkind.Kind { return errkind.Environment }

func (e *DamagedError) Unwrap() error { return e.Err }

// NotFoundError is a slot with no record (Env: the state dir's entry for
// a printed command).
type NotFoundError struct{ Name, Env string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("slot %q does not exist (%s shows the slots; create it with %s)", e.Name,
		advice.Plugin("slot", "list").WithEnv(e.Env), advice.Plugin("slot", "create", e.Name).WithEnv(e.Env))
}

// ErrorKind: naming a slot that does not exist is a usage error.
func (e *NotFoundError) ErrorKind() errkind.Kind { return errkind.Usage }

// NameRE is what a slot name, and the names derived from it, match.
var NameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// ValidName checks a slot name: it becomes part of container, cluster and
// context names.
func ValidName(name string) error {
	if !NameRE.MatchString(name) {
		return fmt.Errorf("slot name %q: use 1-32 lower-case letters, digits and '-', e.g. a or b", name)
	}
	return nil
}

// maxRecordSize caps a slot record; a larger one is damage.
const maxRecordSize = 1 << 20

// SlotPath is the record file of slot name.
func SlotPath(d *state.Dir, name string) string { return d.Join("slots", name+".json") }

// LoadSlot reads a slot's record: *NotFoundError when it has none,
// *DamagedError when it cannot be read or is not the record of its slot.
func LoadSlot(d *state.Dir, name string) (*Slot, error) {
	if err := ValidName(name); err != nil {
		return nil, errkind.Wrap(errkind.Usage, err)
	}
	// Not followed: a record that is a symlink is damage, not a redirect.
	data, err := state.ReadSmall(SlotPath(d, name), maxRecordSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NotFoundError{Name: name, Env: d.CommandEnv()}
	}
	if err != nil {
		return nil, &DamagedError{Name: name, Path: SlotPath(d, name), Env: d.CommandEnv(), Err: err}
	}
	var r Slot
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, &DamagedError{Name: name, Path: SlotPath(d, name), Env: d.CommandEnv(), Err: err}
	}
	if r.Kind != RecordKind || r.Name != name {
		return nil, &DamagedError{Name: name, Path: SlotPath(d, name), Env: d.CommandEnv(), Err: fmt.Errorf("it is not the record of slot %s", name)}
	}
	return &r, nil
}

// SaveSlot writes a slot's record atomically. The caller holds the lock.
func SaveSlot(d *state.Dir, r *Slot) error {
	if err := ValidName(r.Name); err != nil {
		return err
	}
	r.APIVersion, r.Kind = RecordAPIVersion, RecordKind
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if _, err := d.MkdirAll("slots"); err != nil {
		return err
	}
	return state.WriteFile(SlotPath(d, r.Name), append(data, '\n'))
}

// ListSlots returns the names of all slots with a record.
func ListSlots(d *state.Dir) ([]string, error) {
	ents, err := os.ReadDir(d.Join("slots"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if len(n) > 5 && n[len(n)-5:] == ".json" && ValidName(n[:len(n)-5]) == nil {
			out = append(out, n[:len(n)-5])
		}
	}
	return out, nil
}

// Gated reports whether r's last gate passed for the package r holds, and
// no deploy into r started since and did not finish (after one, what r
// holds is not known until a gate passes again).
func (r *Slot) Gated() bool {
	g := r.Gate
	return g != nil && g.Passed && r.Deploying == nil && (r.Package == nil || g.Package == "" || g.Package == r.Package.Digest)
}

// Slot states recorded in Slot.State.
const (
	StateCreating   = "creating"
	StateReady      = "ready"
	StateFailed     = "failed"
	StateDestroying = "destroying"
)

// Ready reports whether the slot is built and not being torn down: only
// a ready slot can be switched to.
func (r *Slot) Ready() bool { return r.State == StateReady }

// The history's notes (journal.Event.Detail) on a slot event that are
// not a plain create, adopt, repair or destroy.
const (
	// DetailOwns: the slot keeps workload clusters after an S1 update
	// made another slot active (the event carries its identity).
	DetailOwns = "owns"
	// DetailGone: slot repair found nothing of a slot running whose
	// record was gone: the slot no longer exists.
	DetailGone = "gone"
	// DetailAlreadyCreated: create, run as a transaction's step, found
	// the slot built with the same settings already (the step's proof).
	DetailAlreadyCreated = "create/already"
	// DetailMoved: an S3 pivot moved workload clusters into or out of the
	// slot (the event carries its identity, with MovedIn and MovedOut).
	DetailMoved = "moved"
)

// FluxSetting is a Flux variable a slot sets: Variable=Value in the
// ConfigMap kubectl-bundle-slot of Namespace; Default is its value where
// no slot sets it.
type FluxSetting struct {
	Namespace string `json:"namespace"`
	Variable  string `json:"variable"`
	Value     string `json:"value"`
	Default   string `json:"default,omitempty"`
}
