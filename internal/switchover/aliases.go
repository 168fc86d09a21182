package switchover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// kubeconfigFiles are the files kubectl reads, in precedence order: the
// explicit one, else $KUBECONFIG's list, else ~/.kube/config.
func kubeconfigFiles(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	return rules.GetLoadingPrecedence()
}

// aliasFile is the file that holds the alias context, else the first file
// kubectl would write to.
func aliasFile(explicit, alias string) string {
	files := kubeconfigFiles(explicit)
	for _, f := range files {
		if cfg, err := clientcmd.LoadFromFile(f); err == nil {
			if _, ok := cfg.Contexts[alias]; ok {
				return f
			}
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return files[0]
}

// mergedConfig is the kubeconfig as kubectl sees it.
func mergedConfig(explicit string) (*clientcmdapi.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	return rules.Load()
}

// checkAlias checks, before any write, that the alias context can be
// pointed at context target: the named kubeconfig exists and holds target.
func checkAlias(explicit, target string) error {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return errkind.New(errkind.Usage, "--kubeconfig %s: %w", explicit, err)
		}
	}
	merged, err := mergedConfig(explicit)
	if err != nil {
		return errkind.New(errkind.Usage, "loading the kubeconfig: %w", err)
	}
	if _, ok := merged.Contexts[target]; !ok {
		return errkind.New(errkind.Environment, "the slot's context %s is not in the kubeconfig%s (%s writes it; pass the file it was written to with --kubeconfig)", target, inFile(explicit), advice.Plugin("slot", "create"))
	}
	return nil
}

func inFile(explicit string) string {
	if explicit == "" {
		return ""
	}
	return " " + explicit
}

// pointAlias makes context alias use the cluster and user of context
// target, by reference to the entries kind wrote; the file is replaced
// atomically and every other entry is kept.
func pointAlias(explicit, alias, target string) error {
	merged, err := mergedConfig(explicit)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	tc, ok := merged.Contexts[target]
	if !ok {
		return fmt.Errorf("the slot's context %s is not in the kubeconfig (%s writes it)", target, advice.Plugin("slot", "create"))
	}
	file := aliasFile(explicit, alias)
	cfg, err := slot.LoadKubeconfig(file)
	if err != nil {
		return err
	}
	cfg.Contexts[alias] = &clientcmdapi.Context{Cluster: tc.Cluster, AuthInfo: tc.AuthInfo, Namespace: tc.Namespace}
	return slot.WriteKubeconfig(file, cfg)
}

// aliasTarget returns the slot context (among candidates) whose cluster
// and user the alias context uses, or "" when none.
func aliasTarget(explicit, alias string, candidates []string) (string, error) {
	merged, err := mergedConfig(explicit)
	if err != nil {
		return "", err
	}
	ac, ok := merged.Contexts[alias]
	if !ok {
		return "", nil
	}
	for _, c := range candidates {
		if tc, ok := merged.Contexts[c]; ok && tc.Cluster == ac.Cluster && tc.AuthInfo == ac.AuthInfo {
			return c, nil
		}
	}
	return "", nil
}

// errGone is a container that does not exist (a create killed before it,
// a destroy half done): it carries no alias.
var errGone = errors.New("no such container")

// networkAliases reads container's aliases on the network; connected is
// false when it is not on it at all.
func (s *Switcher) networkAliases(ctx context.Context, container string) (aliases []string, connected bool, err error) {
	out, err := s.Run.Run(ctx, "docker", "inspect", "--format", "{{json .NetworkSettings.Networks}}", container)
	if err != nil && (strings.Contains(err.Error(), "No such object") || strings.Contains(err.Error(), "No such container")) {
		return nil, false, fmt.Errorf("%w: %s", errGone, container)
	}
	if err != nil {
		return nil, false, err
	}
	var nets map[string]struct {
		Aliases []string `json:"Aliases"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &nets); err != nil {
		return nil, false, fmt.Errorf("reading the networks of %s: %w (output %q)", container, err, out)
	}
	n, ok := nets[s.Network]
	return n.Aliases, ok, nil
}

// registryAliasHolder returns which of the containers carries the alias.
func (s *Switcher) registryAliasHolder(ctx context.Context, containers []string) (string, error) {
	for _, c := range containers {
		aliases, _, err := s.networkAliases(ctx, c)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return "", err
		}
		if slices.Contains(aliases, s.RegistryAlias) {
			return c, nil
		}
	}
	return "", nil
}

// placeRegistryAlias gives target the alias and leaves every other
// registry on the network without it. Docker cannot add or drop one alias
// of a connected container, so a container is reconnected. The target
// claims the alias before the others release it: while both hold it,
// Docker's DNS answers with both (each serves a registry), so a client on
// the network always finds one; releasing first left a window with none
// (measured: 6-8 failed requests of a 20/s loop per switch). Each container
// is checked first, so a re-run after a crash between a disconnect and its
// connect finishes the job (no registry is left off the network). Docker
// gives each container it reconnects another address: the caller writes
// every slot's registry Service after it (refreshRegistryServices).
func (s *Switcher) placeRegistryAlias(ctx context.Context, target string, others []string) error {
	aliases, connected, err := s.networkAliases(ctx, target)
	if err != nil {
		return err
	}
	if !connected || !slices.Contains(aliases, s.RegistryAlias) {
		state.CrashPoint("switch:registry-claim")
		_, _ = s.Run.Run(ctx, "docker", "network", "disconnect", s.Network, target)
		state.CrashPoint("switch:registry-connect")
		if _, err := s.Run.Run(ctx, "docker", "network", "connect", "--alias", s.RegistryAlias, s.Network, target); err != nil {
			return fmt.Errorf("giving alias %s to %s: %w", s.RegistryAlias, target, err)
		}
	}
	for _, o := range others {
		aliases, connected, err := s.networkAliases(ctx, o)
		if errors.Is(err, errGone) {
			continue // moving the alias away from it is done
		}
		if err != nil {
			return err
		}
		if connected && !slices.Contains(aliases, s.RegistryAlias) {
			continue
		}
		state.CrashPoint("switch:registry-release")
		_, _ = s.Run.Run(ctx, "docker", "network", "disconnect", s.Network, o)
		state.CrashPoint("switch:registry-reconnect")
		if _, err := s.Run.Run(ctx, "docker", "network", "connect", s.Network, o); err != nil {
			return fmt.Errorf("reconnecting %s to %s without alias %s: %w", o, s.Network, s.RegistryAlias, err)
		}
	}
	return nil
}

// refreshRegistryServices writes the registry Service of target, and of
// each other slot (others are their registry containers, slotOf names
// their slots), with the address each container has now. Every run writes
// them all: a re-run after a kill between a reconnect and its write finds
// that container already without the alias and reconnects nothing, yet
// its Service still names the address it had. Target's failure fails the
// switch, as the slot made active would serve with its registry's
// in-cluster name leading nowhere. Another slot's is said and does not
// stop the switch: the switch that makes that slot active writes it.
func (s *Switcher) refreshRegistryServices(ctx context.Context, target string, others []string, slotOf map[string]string) error {
	if s.RegistryService == nil {
		return nil
	}
	if err := s.RegistryService(ctx, target); err != nil {
		return fmt.Errorf("slot %s's registry Service (its registry's in-cluster name), after its registry was reconnected: %w; run the switch again", target, err)
	}
	for _, c := range others {
		n := slotOf[c]
		if n == "" {
			continue
		}
		if err := s.RegistryService(ctx, n); err != nil {
			s.logf("NOTE: slot %s's registry Service may still name an address its registry %s had before a switch reconnected it: %v; the switch that makes slot %s active writes it again", n, c, err, n)
		}
	}
	return nil
}

// moveWorkloadContexts points each workload alias context the kubeconfig
// holds (kind-airgap-wl, written once by kubectl bundle-slot
// workload-kubeconfig --merge) at the workload cluster of that name that
// slot target runs (airgap-wl-b). The management cluster's alias decides
// which slot serves; a workload context that cannot be moved (the slot's
// cluster is not up, its secret is missing) is said, with the command that
// moves it, and does not stop the switch.
func (s *Switcher) moveWorkloadContexts(ctx context.Context, target string) {
	if s.WorkloadAccess == nil {
		return
	}
	merged, err := mergedConfig(s.Kubeconfig)
	if err != nil {
		return
	}
	var aliases, old []string
	for name := range merged.Contexts {
		switch {
		case name == s.AliasContext:
		case isWorkloadAlias(merged, name):
			aliases = append(aliases, name)
		case s.isOldWorkloadAlias(merged, name):
			old = append(old, name)
		}
	}
	if len(old) > 0 {
		aliases = append(aliases, s.oursOfOld(ctx, merged, old)...)
	}
	if len(aliases) == 0 {
		return // none written: nothing to move, and no cluster is asked
	}
	slices.Sort(aliases)
	ws, err := s.WorkloadAccess(ctx, target)
	if err != nil {
		for _, name := range aliases {
			s.logf("NOTE: context %s still names a workload cluster of another slot: %v; once slot %s's workload clusters are up: %s", name, err, target,
				s.Dir.Plugin("slot", "workload-kubeconfig", "--slot", target, "--merge"))
		}
		return
	}
	var move []*slot.Workload
	for _, w := range ws {
		if _, ok := merged.Contexts[w.AliasContext]; ok {
			move = append(move, w)
		}
	}
	if len(move) == 0 {
		return
	}
	if err := slot.MergeWorkloads(aliasFile(s.Kubeconfig, move[0].AliasContext), move); err != nil {
		s.logf("NOTE: the workload contexts were not moved to slot %s: %v; run: %s", target, err, s.Dir.Plugin("slot", "workload-kubeconfig", "--slot", target, "--merge"))
		return
	}
	for _, w := range move {
		s.logf("context %s -> %s", w.AliasContext, w.Context)
	}
}

// isWorkloadAlias says whether context name of cfg is a workload alias
// the switch moves: its cluster entry is another context's of the same
// name pattern, kind-<cluster> (written by MergeWorkloads): kind-<alias>-<slot>,
// or kind-<alias>@<slot> for a cluster named as its alias.
func isWorkloadAlias(cfg *clientcmdapi.Config, name string) bool {
	c := cfg.Contexts[name]
	return c != nil && c.Cluster != name && (strings.HasPrefix(c.Cluster, name+"-") || strings.HasPrefix(c.Cluster, name+"@"))
}

// isOldWorkloadAlias says whether context name is kind-<base> for a
// configured workload-cluster base name with a cluster entry of its own
// name: the alias as workload-kubeconfig --merge wrote it before its
// entries carried the slot (kind-airgap-wl on cluster kind-airgap-wl).
// It names the cluster of whichever slot it was merged from; the switch
// moves it like the others.
func (s *Switcher) isOldWorkloadAlias(cfg *clientcmdapi.Config, name string) bool {
	c := cfg.Contexts[name]
	base, ok := strings.CutPrefix(name, "kind-")
	return c != nil && c.Cluster == name && ok && slices.Contains(s.WorkloadAliases, base)
}

// oursOfOld keeps of the old-style aliases (isOldWorkloadAlias) those
// whose server is the published port of a slot's workload cluster of that
// base name (the load balancer BASE-SLOT-lb, or BASE-lb where a slot runs a
// cluster named BASE itself, as an adopted site does): a kind-<base>
// context of the operator's own, on a cluster no slot runs, has the same
// shape and is left as it is (said, with the command that writes ours).
// The slots are asked whether they run BASE only when the server is
// BASE-lb's port; one that does not answer leaves the context as it is,
// said as such (not as the operator's own).
func (s *Switcher) oursOfOld(ctx context.Context, cfg *clientcmdapi.Config, names []string) []string {
	slots, _ := slot.List(s.Dir)
	var ours []string
	for _, name := range names {
		base := strings.TrimPrefix(name, "kind-")
		var server string
		if cl := cfg.Clusters[cfg.Contexts[name].Cluster]; cl != nil {
			server = cl.Server
		}
		found := s.servesAt(ctx, server, lbNames(base, slots)...)
		var unasked []string
		if !found && s.servesAt(ctx, server, base+"-lb") {
			found, unasked = s.slotRunsBase(ctx, base, slots)
		}
		switch {
		case found:
			ours = append(ours, name)
		case len(unasked) > 0:
			s.logf("NOTE: context %s is left as it is: its server %s is the load balancer of a workload cluster %s, and whether a slot runs it is unknown (%s); once that slot answers, run the switch again",
				name, server, base, strings.Join(unasked, "; "))
		default:
			s.logf("NOTE: context %s is left as it is: its server %s is no workload cluster %s of a slot (a context of your own?); the slots' workload contexts are written by %s",
				name, server, base, s.Dir.Plugin("slot", "workload-kubeconfig", "--merge"))
		}
	}
	return ours
}

// servesAt says whether server is the published API port of one of the
// load balancer containers lbs.
func (s *Switcher) servesAt(ctx context.Context, server string, lbs ...string) bool {
	for _, lb := range lbs {
		port, err := runner.PublishedPort(ctx, s.Run, lb, "6443/tcp")
		if err == nil && server != "" && serverKey(server) == serverKey("https://127.0.0.1:"+port) {
			return true
		}
	}
	return false
}

// slotRunsBase: some slot runs a workload cluster named base itself, with
// no slot suffix (an adopted site's, or one its package names so): by its
// names, or by Cluster API's kubeconfig of it in the slot's management
// cluster. Only then is base-lb a slot's load balancer; else it is a
// cluster of the operator's own of that name. unasked says each slot that
// could not be asked, when none said yes.
func (s *Switcher) slotRunsBase(ctx context.Context, base string, slots []string) (runs bool, unasked []string) {
	if s.RunsWorkload == nil {
		return false, nil
	}
	for _, sl := range slots {
		ok, err := s.RunsWorkload(ctx, sl, base)
		if ok {
			return true, nil
		}
		if err != nil {
			unasked = append(unasked, fmt.Sprintf("slot %s: %v", sl, err))
		}
	}
	return false, unasked
}

// lbNames are the load balancers of workload cluster base in each slot.
func lbNames(base string, slots []string) []string {
	var out []string
	for _, sl := range slots {
		out = append(out, base+"-"+sl+"-lb")
	}
	return out
}

// serverKey is an API server address as host:port, the loopback's
// spellings as one (a published port is 0.0.0.0 to Docker, 127.0.0.1 or
// localhost in a kubeconfig, with or without a trailing slash).
func serverKey(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return strings.TrimSuffix(server, "/")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	switch host {
	case "0.0.0.0", "localhost", "::1", "::":
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
