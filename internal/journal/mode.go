package journal

import "fmt"

// Switch modes of a blue-green update: what the workload clusters do at
// the switch. The transaction records the one the operator chose, so that
// every step of the update (preflight, switch, accept) follows it, and the
// switch record keeps the one a switch was made with.
const (
	// SwitchS2 (the default) rebuilds: the candidate's package builds its
	// own workload clusters, and the old slot's go when it is retired.
	SwitchS2 = ""
	// SwitchRepoint (S1) is for management-only packages: only the
	// pointer and the aliases move, the workload clusters stay with the
	// old slot, which keeps running them after accept (it owns them and
	// is not destroyed).
	SwitchRepoint = "repoint"
	// SwitchPivot (S3) also moves the Cluster API objects of the workload
	// clusters from the previous slot's management cluster to the
	// target's with clusterctl's mover; back moves them back.
	SwitchPivot = "pivot"
)

// SwitchModes is the help text of the --switch-mode and --mode flags.
const SwitchModes = "s2 (default: the candidate builds its own workload clusters), repoint (S1: they stay with the old slot, which keeps them after accept) or pivot (S3: their Cluster API objects move to the candidate)"

// ParseSwitchMode validates a switch mode as the operator names it; s2 is
// returned as SwitchS2 ("").
func ParseSwitchMode(s string) (string, error) {
	switch s {
	case "", "s2":
		return SwitchS2, nil
	case SwitchRepoint, SwitchPivot:
		return s, nil
	}
	return "", fmt.Errorf("unknown switch mode %q: use s2 (the default), repoint or pivot", s)
}

// SwitchModeName is mode as the operator names it.
func SwitchModeName(mode string) string {
	if mode == SwitchS2 {
		return "s2"
	}
	return mode
}
