package model_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-bundle/kubectl-bundle/internal/invariant"
)

// The model's operations are internal/invariant's (one line each,
// readable and replayable), every plugin command in-process, and two of
// its own:
//
//	cwd relative|absolute the state dir named relatively from another
//	                      directory (printed commands are pasted elsewhere), or back
//	config EDIT           on the existing site, an edit of config.yaml or
//	                      the kubeconfig by the operator (configEdit)
//
// fakekill=STEP kills the command inside that step of the fakes (the
// process, and a journal run around it, abandon the step there); fail=
// makes the step fail. The strategy scripts run in-process too, as their
// loop over journal advance (machine.script); TestInvariant (e2e) runs them
// as processes, killed at any instant.

// drawOp draws one operation.
func drawOp(g *invariant.Gen) string {
	return modify(g, g.Weighted(slices.Concat(g.PluginOps(16), scriptOps(g), []invariant.WeightedOp{cwdOp(g)})))
}

// scriptOps are the strategy scripts' runs, drawn scriptDiv times less
// often than TestInvariant draws them: a run costs as much as tens of
// plugin commands. KB_MODEL_SCRIPTS=N sets scriptDiv; 0 draws none (the
// plugins only, for a rate to compare).
func scriptOps(g *invariant.Gen) []invariant.WeightedOp {
	if scriptDiv == 0 {
		return nil
	}
	return g.ScriptOps(scriptDiv)
}

var scriptDiv = func() int {
	if n, err := strconv.Atoi(os.Getenv("KB_MODEL_SCRIPTS")); err == nil && n >= 0 {
		return n
	}
	return 3
}()

// cwdOp is the model's cwd operation.
func cwdOp(g *invariant.Gen) invariant.WeightedOp {
	return invariant.WeightedOp{W: 1, F: func() string { return "cwd " + g.Pick("relative", "relative", "absolute") }}
}

// drawExistingOp draws one operation of a sequence on the existing site:
// those of drawOp, and the operator's edits of config.yaml and the
// kubeconfig (configEdit).
func drawExistingOp(g *invariant.Gen) string {
	return modify(g, g.Weighted(slices.Concat(g.PluginOps(16), scriptOps(g), []invariant.WeightedOp{cwdOp(g), {W: 4, F: func() string { return configEdit(g) }}})))
}

// configEdit draws an edit of the existing site's settings (issue 32,
// class 2: two slots can be one cluster):
//
//	config copy     config.yaml gives slot b slot a's context (a copy-paste)
//	config swap     config.yaml gives each slot the other's context
//	config moved SL the kubeconfig's context of slot SL names the other
//	                slot's cluster (pointed elsewhere after create)
//	config good     both put right
//
// An edit is sometimes followed by what meets it: a create and deploy of
// slot b after a copy or a swap, a switch to the slot whose context moved.
func configEdit(g *invariant.Gen) string {
	e := g.Pick("copy", "copy", "swap", "moved a", "moved b", "good")
	switch {
	case (e == "copy" || e == "swap") && g.Chance(0.3):
		g.Then("kubectl-bundle-slot create b", "kubectl-bundle-slot deploy b "+g.Pkg())
	case strings.HasPrefix(e, "moved ") && g.Chance(0.3):
		g.Then("kubectl-bundle-switch to " + strings.TrimPrefix(e, "moved "))
	}
	return "config " + e
}

// modify sometimes kills a command inside a step of the fakes, or makes
// one fail.
func modify(g *invariant.Gen, line string) string {
	if invariant.IsCommand(line) {
		if g.Chance(0.1) {
			line = "fakekill=" + g.Pick(invariant.FakeKills...) + " " + line
		}
		if g.Chance(0.05) {
			line = "fail=" + g.Pick(invariant.FakeFails...) + " " + line
		}
	}
	return line
}

// Op runs the model's own operations: cwd, config.
func (m *machine) Op(r *invariant.Run, f []string) (bool, *invariant.Violation) {
	if f[0] == "config" {
		if err := m.configEdit(f[1:]); err != nil {
			return true, r.Fail("setup", "%s: %v", strings.Join(f, " "), err)
		}
		r.Logf("%s", strings.Join(f, " "))
		return true, nil
	}
	if f[0] != "cwd" {
		return false, nil
	}
	m.relative = f[1] == "relative"
	if m.relative {
		_ = os.Setenv("KUBECTL_BUNDLE_STATE_DIR", "state")
		_ = os.Chdir(m.root)
	} else {
		_ = os.Setenv("KUBECTL_BUNDLE_STATE_DIR", m.files.State())
		_ = os.Chdir(filepath.Join(m.root, "work"))
	}
	r.Logf("%s", strings.Join(f, " "))
	return true, nil
}

// Exec runs an operation's command in-process.
func (m *machine) Exec(r *invariant.Run, p invariant.Parsed, argv []string) (invariant.Result, *invariant.Violation) {
	res := m.run(argv, p.Env())
	if res.Killed {
		r.C.Kills["inside a step"]++
	}
	if res.Code == codeHung {
		return res, r.Fail("I3", "%s hung:\n%s", strings.Join(argv, " "), invariant.Tail(res.Out))
	}
	return res, nil
}

// pasteDir is where a printed command is run: another directory than the
// one the command that printed it ran in, while the state dir is named
// relatively (issue 32, class 4).
func (m *machine) pasteDir() string {
	if m.relative {
		return filepath.Join(m.root, "elsewhere")
	}
	return ""
}

// RunPrinted runs a printed command line as an operator pastes it (a
// chain "A && B" runs B only after A exits 0).
func (m *machine) RunPrinted(r *invariant.Run, what, line string) (invariant.Result, *invariant.Violation) {
	if i := strings.Index(line, "#"); i >= 0 {
		line = line[:i]
	}
	if first, rest, ok := strings.Cut(line, " && "); ok {
		res, v := m.RunPrinted(r, what, first)
		if v != nil || res.Code != 0 {
			if res.Code == 1 && strings.Contains(first, "bundle-gate") {
				// "gate && switch": the switch runs once the gate passes;
				// the gate failing is its verdict, not a failed repair.
				res.Code = invariant.CodeGateFails
			}
			return res, v
		}
		return m.RunPrinted(r, what, rest)
	}
	env, argv, err := invariant.SplitLine(line)
	if err != nil || len(argv) == 0 {
		return invariant.Result{Out: fmt.Sprint(err), Code: 2}, nil
	}
	if invariant.IsScript(argv) {
		// A strategy script: it must run from anywhere: an absolute path,
		// and the state dir named when it is relative.
		r.C.Scripts++
		if !filepath.IsAbs(argv[0]) {
			return invariant.Result{}, r.Fail("I3", "a printed command names its script by a relative path: %s", line)
		}
		if m.relative && !strings.Contains(strings.Join(env, " "), "KUBECTL_BUNDLE_STATE_DIR=/") {
			if what == "next" {
				return invariant.Result{}, r.Fail("I3", "journal status's next command does not name the state dir, which is relative (pasted elsewhere it opens another): %s", line)
			}
			return invariant.Result{}, r.Fail("I3", "a printed command does not name the state dir, which is relative here (pasted elsewhere it opens another): %s", line)
		}
	}
	dir := m.pasteDir()
	if dir != "" {
		wd, _ := os.Getwd()
		_ = os.Chdir(dir)
		defer func() { _ = os.Chdir(wd) }()
	}
	res := m.run(argv, env)
	if m.site == siteExisting && res.Code == 3 && settingsRefusal(res.Out) {
		// Refused because config.yaml or the kubeconfig makes two slots
		// one cluster (the operator's edit): the operator puts them right,
		// as the refusal asks, and runs the command again.
		if err := m.configEdit([]string{"good"}); err != nil {
			return res, r.Fail("setup", "putting the settings right: %v", err)
		}
		r.Logf("  %s: refused for the settings: config good, and again", line)
		res = m.run(argv, env)
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
			_ = os.RemoveAll(filepath.Join(dir, "state"))
			if what == "next" {
				return res, r.Fail("I3", "journal status's next command, pasted in another directory, opened another state dir (a relative state dir): %s", line)
			}
			return res, r.Fail("I3", "a printed command, pasted in another directory, opened another state dir (the state dir is relative here): %s", line)
		}
	}
	return res, nil
}

// settingsRefusal: out is a refusal of two slots on one cluster, or of a
// slot whose context now reaches another cluster (slot/clusterid.go).
func settingsRefusal(out string) bool {
	return strings.Contains(out, "another cluster; nothing was changed") ||
		strings.Contains(out, "two slots cannot be one cluster") || strings.Contains(out, "would be one cluster")
}

// configEdit makes an edit configEdit (the function) draws, on the
// existing site: config.yaml's contexts, or the cluster a context of the
// operator's kubeconfig names.
func (m *machine) configEdit(f []string) error {
	if m.site != siteExisting {
		return fmt.Errorf("config edits are the existing site's (this sequence's site is %q)", m.site)
	}
	own := map[string]string{ctxEast: ctxEast, ctxWest: ctxWest} // context -> its cluster entry
	switch {
	case len(f) == 1 && f[0] == "copy":
		return m.writeConfig(ctxEast, ctxEast)
	case len(f) == 1 && f[0] == "swap":
		return m.writeConfig(ctxWest, ctxEast)
	case len(f) == 1 && f[0] == "good":
		if err := m.writeConfig(ctxEast, ctxWest); err != nil {
			return err
		}
	case len(f) == 2 && f[0] == "moved" && f[1] == "a":
		own[ctxEast] = ctxWest
	case len(f) == 2 && f[0] == "moved" && f[1] == "b":
		own[ctxWest] = ctxEast
	default:
		return fmt.Errorf("unknown edit %q", strings.Join(f, " "))
	}
	path := filepath.Join(m.root, "kubeconfig")
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	for name, cluster := range own {
		if c := kc.Contexts[name]; c != nil {
			c.Cluster = cluster
		}
	}
	return clientcmd.WriteToFile(*kc, path)
}
