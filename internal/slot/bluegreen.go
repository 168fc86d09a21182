package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/bluegreen"
	"github.com/kubectl-bundle/kubectl-bundle/internal/fluxart"
	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/site"
)

// PreflightBlueGreen adds to rep the S2 contract of the package at
// pkgPath for building it in rep's slot next to the other slot: the
// package declares SLOT, no name it puts on the shared Docker daemon or
// network is the same for both slots, and none the candidate would create
// is another slot's or already on the daemon for another slot. A
// blocking finding names the reason and the alternatives. In switch mode
// repoint (S1) the candidate builds no workload clusters of its own, so a
// package without SLOT is not refused for it (the finding says why).
func (m *Manager) PreflightBlueGreen(ctx context.Context, rep *PreflightReport, pkgPath, mode string) {
	candidate := rep.Slot
	other := m.otherSlot(candidate)
	if other == "" {
		rep.add("blue-green", false, "blue/green needs two slots, config.yaml's slots: lists %v", m.Config.Slots)
		return
	}
	// The candidate is never the slot that serves (journal begin refuses
	// it too): a check that passes here would be advice that fails there.
	if active, err := site.Read(m.Dir).Active(); err == nil && active == candidate {
		rep.add("candidate", false, "slot %s is the active slot: blue/green builds the candidate next to it (%s)", candidate, m.Dir.Plugin("slot", "preflight", other, "--blue-green", "--package", pkgPath))
		return
	}
	p, err := bluegreen.ReadFile(pkgPath)
	if err != nil {
		rep.add("blue-green", false, "%v", err)
		return
	}
	res, err := bluegreen.Check(p, candidate, other)
	if err != nil {
		rep.add("blue-green", false, "rendering the package's manifests with %s=%s and %s=%s: %v", bluegreen.Variable, candidate, bluegreen.Variable, other, err)
		return
	}
	rep.BlueGreen = res
	alt := "; " + bluegreen.Alternatives
	switch {
	case res.Declared:
		rep.add("slot-variable", true, "the package declares the Zarf variable %s (slot %s deploys it with %s=%s)", bluegreen.Variable, candidate, bluegreen.Variable, candidate)
	case mode == journal.SwitchRepoint:
		rep.add("slot-variable", true, "the package does not declare the Zarf variable %s, which switch mode repoint (S1) does not need: the workload clusters stay with slot %s, and slot %s builds none of its own",
			bluegreen.Variable, other, candidate)
	case mode == journal.SwitchPivot:
		rep.add("slot-variable", true, "the package does not declare the Zarf variable %s, which switch mode pivot (S3) does not need: the workload clusters' Cluster API objects move from slot %s to slot %s, which builds none of its own",
			bluegreen.Variable, other, candidate)
	case m.Config.SlotVariable == SlotVariableOptional:
		rep.Findings = append(rep.Findings, Finding{Check: "slot-variable", OK: false, Message: fmt.Sprintf(
			"the package does not declare the Zarf variable %s; allowed by config.yaml's slotVariable: optional, so only the names found below keep the slots apart", bluegreen.Variable)})
	default:
		rep.add("slot-variable", false, "the package does not declare the Zarf variable %s, so both slots would deploy it with the same names: it is not fit for blue/green (S2), whose slots share this Docker daemon and network. "+
			"Declare %s in zarf.yaml's variables: and use ###ZARF_VAR_%s### in every workload cluster, load balancer and registry host name; or use one of %s",
			bluegreen.Variable, bluegreen.Variable, bluegreen.Variable, strings.TrimPrefix(alt, "; "))
	}
	if len(res.Same) > 0 {
		var how []string
		if slices.ContainsFunc(res.Same, func(n bluegreen.Name) bool { return !strings.HasPrefix(n.Where, bluegreen.FluxWhere) }) {
			how = append(how, fmt.Sprintf("derive each from ###ZARF_VAR_%s###", bluegreen.Variable))
		}
		if slices.ContainsFunc(res.Same, func(n bluegreen.Name) bool { return strings.HasPrefix(n.Where, bluegreen.FluxWhere) }) {
			how = append(how, "a workload cluster named in a Flux artifact, which Zarf does not template, is the same for every slot unless the slot sets it: "+
				"build the artifact with the name as a Flux variable with the site's default (${WORKLOAD_CLUSTER_NAME:=local-workload}) and give each of its Flux Kustomizations "+
				"postBuild.substituteFrom: [{kind: ConfigMap, name: "+fluxart.SlotConfigMap+", optional: true}], which slot "+candidate+" writes with its own value (docs/krops.md, \"Two slots side by side\")")
		}
		rep.add("shared-names", false, "the same for slot %s and slot %s, so the two slots' workloads would collide or adopt each other's: %s; %s%s",
			candidate, other, joinNames(res.Same), strings.Join(how, "; "), alt)
	} else {
		rep.add("shared-names", true, "%d name(s) on the shared Docker daemon or network, all different for slot %s and slot %s", len(res.Candidate), candidate, other)
	}
	if settings, err := p.SlotSettings(candidate); err == nil && len(settings) > 0 {
		var names []string
		for _, st := range settings {
			names = append(names, fmt.Sprintf("%s=%s (ConfigMap %s/%s; where no slot sets it: %s)", st.Variable, st.Value, st.Namespace, fluxart.SlotConfigMap, st.Default))
		}
		rep.add("flux-names", true, "slot %s gives the package's Flux artifacts names of its own, written by slot create before the deploy: %s", candidate, strings.Join(names, ", "))
	}
	if arts, err := p.Flux(); err == nil {
		var unsub []string
		for _, a := range arts {
			for _, c := range a.Clusters {
				if c.DefaultUnsubstituted {
					unsub = append(unsub, fmt.Sprintf("Kustomization %s/%s (workload cluster %s)", c.KustomizationNamespace, c.Kustomization, c.Name))
				}
			}
		}
		if len(unsub) > 0 {
			// Not for this slot, which gets the ConfigMap: for a slot or a
			// site that has none, where the same package then fails.
			rep.Findings = append(rep.Findings, Finding{Check: "flux-defaults", OK: false, Message: fmt.Sprintf(
				"%s: where no ConfigMap %s is (a site without the tool, a slot created without --package), Flux's default substituteStrategy (WithVariables) substitutes nothing, not even the defaults, and the name reaches the API server as ${VAR:=default}, which it refuses; "+
					"give each such Kustomization postBuild.substituteStrategy: Always (Flux v2.9 and later) or one postBuild.substitute entry (docs/krops.md, \"Two slots side by side\")",
				strings.Join(unsub, ", "), fluxart.SlotConfigMap)})
		}
	}
	m.preflightTaken(ctx, rep, res.Candidate, candidate)
}

// preflightTaken: no name the candidate would create is derived for, or
// already used on the daemon by, another slot; and every workload cluster
// is one slot destroy finds (config.yaml's workloadClusters).
func (m *Manager) preflightTaken(ctx context.Context, rep *PreflightReport, names []bluegreen.Name, candidate string) {
	mine, err := m.Config.NamesFor(candidate)
	if err != nil {
		rep.add("taken-names", false, "%v", err)
		return
	}
	var others []*Names
	for _, s := range m.Config.Slots {
		if s == candidate {
			continue
		}
		if n, err := m.NamesOf(s); err == nil {
			others = append(others, n)
		}
	}
	var containers []container
	if m.Config.Provider == ProviderKind {
		if containers, err = m.containers(ctx); err != nil {
			rep.add("taken-names", false, "listing containers: %v", err)
			return
		}
	}
	_, lerr := Load(m.Dir, candidate)
	fresh := errors.As(lerr, new(*NotFoundError)) // leftovers on the daemon are no record's
	var taken, unowned []string
	for _, nm := range names {
		if fresh {
			for _, c := range containers {
				if (c.Name == nm.Name || nm.Kind == bluegreen.KindWorkload && strings.HasPrefix(c.Name, nm.Name+"-")) &&
					!slices.ContainsFunc(others, func(o *Names) bool { return owned(c.Name, o) }) {
					taken = append(taken, fmt.Sprintf("%s: container %s is already on the Docker daemon", nm, c.Name))
				}
			}
		}
		for _, o := range others {
			if belongs(nm.Name, o) {
				taken = append(taken, fmt.Sprintf("%s is slot %s's", nm, o.Slot))
			}
			for _, c := range containers {
				if owned(c.Name, o) && (c.Name == nm.Name || nm.Kind == bluegreen.KindWorkload && strings.HasPrefix(c.Name, nm.Name+"-")) {
					taken = append(taken, fmt.Sprintf("%s: container %s of slot %s exists", nm, c.Name, o.Slot))
				}
			}
		}
		if nm.Kind == bluegreen.KindWorkload && !slices.Contains(mine.Workloads, nm.Name) {
			unowned = append(unowned, nm.Name)
		}
	}
	if len(taken) > 0 {
		rep.add("taken-names", false, "names the package would create in slot %s already belong to another slot: %s%s", candidate, strings.Join(dedupe(taken), "; "), "; "+bluegreen.Alternatives)
	} else {
		rep.add("taken-names", true, "no name the package creates in slot %s belongs to another slot", candidate)
	}
	if len(unowned) > 0 {
		rep.add("workload-names", false, "workload cluster(s) %s are not slot %s's (%s): slot destroy would leave their containers; set workloadClusters: in config.yaml to their names without the -%s suffix",
			strings.Join(dedupe(unowned), ", "), candidate, strings.Join(mine.Workloads, ", "), candidate)
	}
}

// belongs: name is one of n's derived names (cluster, registry, workloads).
func belongs(name string, n *Names) bool {
	if name == n.Registry || name == n.Cluster || slices.Contains(n.Workloads, name) {
		return true
	}
	return (strings.HasPrefix(name, n.Cluster+"-") && !n.derivedName(name)) || ownedWorkload(name, n)
}

func (m *Manager) otherSlot(s string) string {
	for _, o := range m.Config.Slots {
		if o != s {
			return o
		}
	}
	return ""
}

func joinNames(ns []bluegreen.Name) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = n.String()
	}
	return strings.Join(s, ", ")
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
