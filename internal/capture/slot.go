package capture

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-bundle/kubectl-bundle/internal/evidence"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// MaxTotal bounds a whole capture, whatever its items' timeouts add up to.
const MaxTotal = 3 * time.Minute

// Failure says what failed on which slot.
type Failure struct {
	// What is "deploy" or "gate".
	What string
	Slot string
	// Record is the slot's record (nil when it could not be read).
	Record *slot.Record
	// Config is the site's config (the slot's derived names).
	Config *slot.Config
	// Rest reaches the slot's API server; nil: the slot's kubeconfig.
	Rest *rest.Config
	Run  runner.Runner
}

// ForSlot captures a failure of slot f.Slot into the evidence of the
// transaction it ran for (debug/<time>-<what>-<slot>/), or into
// <state>/debug/ when none is open, and returns the capture's path.
func ForSlot(ctx context.Context, d *state.Dir, f Failure) (string, error) {
	name := evidence.Stamp(time.Now()) + "-" + f.What + "-" + f.Slot
	var dir string
	var err error
	if id := evidence.Current(d); id != "" {
		dir, err = evidence.Ensure(d, id, evidence.DebugDir, name)
	} else {
		dir, err = d.MkdirAll("debug", name)
	}
	if err != nil {
		return "", err
	}
	o := Options{Config: f.Rest, Run: f.Run, Containers: slotContainers(f)}
	if o.Config == nil {
		o.Config, o.ConfigErr = clientcmd.BuildConfigFromFlags("", slot.KubeconfigPath(d, f.Slot))
		if o.ConfigErr != nil {
			o.ConfigErr = fmt.Errorf("the slot's kubeconfig: %w", o.ConfigErr)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), MaxTotal)
	defer cancel()
	if _, err := Run(ctx, dir, o); err != nil {
		return dir, err
	}
	return dir, nil
}

// slotContainers matches the slot's Docker containers: its kind nodes
// (named after its cluster), its registry and its CAPD workload clusters'
// containers (named after each workload cluster).
func slotContainers(f Failure) func(string) bool {
	var exact, prefixes []string
	if f.Record != nil {
		if f.Record.Cluster != "" {
			prefixes = append(prefixes, f.Record.Cluster+"-")
		}
		if f.Record.Registry != "" {
			exact = append(exact, f.Record.Registry)
		}
	}
	if f.Config != nil {
		if n, err := f.Config.NamesFor(f.Slot); err == nil {
			prefixes = append(prefixes, n.Cluster+"-")
			exact = append(exact, n.Registry)
			for _, w := range n.Workloads {
				prefixes = append(prefixes, w+"-")
			}
		}
	}
	return func(name string) bool {
		for _, e := range exact {
			if name == e {
				return true
			}
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
}
