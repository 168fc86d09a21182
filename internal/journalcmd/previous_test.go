package journalcmd

import (
	"os"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// The package to go back to after accept is the fallback of the update
// that installed the current package and completed; a later update that
// failed (its fallback is the current package) or was reverted does not
// count; the runbook's old "fallback of the last begin" named the current
// package after a failed update.
func TestPreviousIsWhatTheCurrentPackageReplaced(t *testing.T) {
	v1, v2, v3 := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	begin := func(txn, target, fallback string) journal.Event {
		return journal.Event{Type: journal.EventBegin, TxnID: txn, Target: target, Fallback: fallback, Strategy: journal.BlueGreen, Package: "/archives/" + target[:4] + ".tar.zst"}
	}
	end := func(txn string, p journal.Phase) journal.Event {
		return journal.Event{Type: journal.EventEnd, TxnID: txn, Phase: p}
	}
	events := []journal.Event{
		begin("t1", v1, ""), end("t1", journal.Retired), // v1 first, by an update with nothing before it
		begin("t2", v2, v1), end("t2", journal.Retired), // v2 replaced v1
		begin("t3", v3, v2), end("t3", journal.RolledBack), // v3 failed
		begin("t4", v1, v2), end("t4", journal.RolledBack), // going back to v1 failed too
	}
	v, err := previous(events, "b", v2)
	if err != nil || v.Digest != v1 || v.InstalledBy != "t2" || v.Phase != string(journal.Retired) || v.Source != "/archives/1111.tar.zst" {
		t.Fatalf("previous of v2 = %+v, %v; want v1, installed by t2", v, err)
	}
	if _, err := previous(events, "a", v3); err == nil || !strings.Contains(err.Error(), "no completed update in the history installed") {
		t.Errorf("previous of v3, which never completed: %v; want the refusal", err)
	}
	if _, err := previous(events, "a", v1); err == nil || !strings.Contains(err.Error(), "recorded no package to fall back to") {
		t.Errorf("previous of v1, installed with nothing before it: %v; want the refusal", err)
	}
	// An in-place update that committed counts as well.
	events = append(events, journal.Event{Type: journal.EventBegin, TxnID: "t5", Target: v3, Fallback: v2, Strategy: journal.InPlace}, end("t5", journal.Committed))
	if v, err := previous(events, "a", v3); err != nil || v.Digest != v2 {
		t.Errorf("previous of v3 after an in-place commit = %+v, %v; want v2", v, err)
	}
}

// journal next --run runs a plugin's binary itself (no kubectl needed),
// either spelling on PATH, and anything else as it is.
func TestNextRunProgram(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if name, args := program([]string{"rm", "/x"}); name != "rm" || strings.Join(args, " ") != "/x" {
		t.Errorf("rm: %s %v", name, args)
	}
	if name, args := program([]string{"kubectl", "bundle-switch", "to", "a"}); !strings.HasSuffix(name, "kubectl-bundle-switch") || strings.Join(args, " ") != "to a" {
		t.Errorf("no plugin on PATH: %s %v", name, args)
	}
	writeExe(t, dir+"/kubectl-bundle_switch")
	if name, _ := program([]string{"kubectl", "bundle-switch", "to", "a"}); name != dir+"/kubectl-bundle_switch" {
		t.Errorf("krew's spelling on PATH: %s", name)
	}
	writeExe(t, dir+"/kubectl-bundle-switch")
	if name, _ := program([]string{"kubectl", "bundle-switch", "to", "a"}); name != dir+"/kubectl-bundle-switch" {
		t.Errorf("both spellings on PATH: %s, want make install's first", name)
	}
}

func writeExe(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
