package gate

import (
	"encoding/json"
	"strings"
)

// SlotToken in an object's name, a workload check's cluster, secret or
// load balancer stands for the slot under gate: blue/green's workload
// clusters are named after their slot (airgap-wl-@slot is airgap-wl-b
// with --slot b), so one gate file serves every slot and never checks
// another slot's workloads. Without a slot, "-@slot" is dropped (the
// names of a site that is not built in slots). In allowedRegistries the
// same token is SlotRegistry.
const SlotToken = "@slot"

// ForSlot returns a copy of g with SlotToken in its names expanded for
// slot ("" without --slot); g is not changed.
func (g *Gate) ForSlot(slot string) *Gate {
	var c Gate
	b, err := json.Marshal(g)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		c = *g // not reached: a Gate is plain data
	}
	forSlot(c.Spec.Checks, slot)
	return &c
}

func forSlot(checks []Check, slot string) {
	expand := func(s *string) {
		if !strings.Contains(*s, SlotToken) {
			return
		}
		if slot == "" {
			*s = strings.ReplaceAll(strings.ReplaceAll(*s, "-"+SlotToken, ""), SlotToken, "")
			return
		}
		*s = strings.ReplaceAll(*s, SlotToken, slot)
	}
	for i := range checks {
		c := &checks[i]
		if c.Resource != nil {
			expand(&c.Resource.Name)
		}
		if c.Field != nil {
			expand(&c.Field.Name)
		}
		if w := c.Workload; w != nil {
			expand(&w.Cluster)
			expand(&w.Secret)
			expand(&w.LoadBalancer)
			forSlot(w.Checks, slot)
		}
	}
}

// capiGroup is Cluster API's API group: a check of its objects checks a
// workload cluster's management, which stays with the slot that owns it.
const capiGroup = "cluster.x-k8s.io"

// ManagementOnly returns a copy of g without the checks of workload
// clusters (workload checks, and resource and field checks of Cluster API
// objects), for a slot that owns none (S1 repoint: the workload clusters
// stay with the old slot), and the names of the checks it dropped; g is
// not changed.
func (g *Gate) ManagementOnly() (*Gate, []string) {
	c := *g
	c.Spec.Checks = nil
	var dropped []string
	for _, ch := range g.Spec.Checks {
		if ch.Workload != nil || capiRef(ch.Resource) || capiField(ch.Field) {
			dropped = append(dropped, ch.Name)
			continue
		}
		c.Spec.Checks = append(c.Spec.Checks, ch)
	}
	return &c, dropped
}

func capiRef(r *ResourceCheck) bool { return r != nil && isCAPI(r.APIVersion) }
func capiField(f *FieldCheck) bool  { return f != nil && isCAPI(f.APIVersion) }

// isCAPI reports whether apiVersion is in Cluster API's group or one of
// its providers' (infrastructure.cluster.x-k8s.io and the like).
func isCAPI(apiVersion string) bool {
	group, _, ok := strings.Cut(apiVersion, "/")
	return ok && (group == capiGroup || strings.HasSuffix(group, "."+capiGroup))
}
