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
