package journal

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNextCommandRunsAsPrinted(t *testing.T) {
	digest := strings.Repeat("1", 64)
	key := &Verification{Key: "/site/keys/cosign.pub"}
	keyless := &Verification{Identity: "ops@example.com", Issuer: "https://issuer.example", TrustedRoot: "/site/trusted root.json"}
	bg := func(p Phase, status string, steps ...Phase) *Transaction {
		tx := &Transaction{Strategy: BlueGreen, Target: digest, Package: "/site/pkg.tar.zst", Phase: p, Status: status}
		for _, s := range steps {
			tx.Steps = append(tx.Steps, Step{Phase: s, Status: StatusDone})
		}
		tx.Steps = append(tx.Steps, Step{Phase: p, Status: status, Error: "boom"})
		return tx
	}
	bgScript := ScriptPath(BlueGreen)
	for _, c := range []struct {
		name string
		tx   *Transaction
		v    *Verification
		want string
		alt  []string
		why  string
	}{
		{"blue-green failed names apply and the key", bg(Provisioned, StatusFailed), key,
			bgScript + " apply /site/pkg.tar.zst --key /site/keys/cosign.pub", nil, "PROVISIONED failed"},
		{"blue-green switch failed names apply and the way back", bg(Switched, StatusFailed, Verified, Healthy), key,
			bgScript + " apply /site/pkg.tar.zst --key /site/keys/cosign.pub", []string{bgScript + " revert --key /site/keys/cosign.pub"}, "the switch to the candidate failed (boom): re-running the orchestrator retries it, once what failed is fixed; to stay on the previous slot instead, revert"},
		{"keyless material, quoted", bg(Verified, StatusStarted), keyless,
			bgScript + " apply /site/pkg.tar.zst --certificate-identity ops@example.com --certificate-oidc-issuer https://issuer.example --trusted-root '/site/trusted root.json'", nil, "interrupted"},
		{"no material says what to add", bg(Healthy, StatusDone), nil,
			bgScript + " apply /site/pkg.tar.zst", nil, "--key ABS_PATH"},
		{"soaking after the switch", bg(Switched, StatusDone, Verified, Healthy), key,
			bgScript + " accept --key /site/keys/cosign.pub", []string{bgScript + " revert --key /site/keys/cosign.pub"}, "soaking: accept or revert"},
		{"soaking", bg(Soaking, StatusDone, Switched), nil,
			bgScript + " accept", []string{bgScript + " revert"}, "soaking: accept or revert"},
		{"soaking as the switch leaves it (started until accept)", bg(Soaking, StatusStarted, Switched), key,
			bgScript + " accept --key /site/keys/cosign.pub", []string{bgScript + " revert --key /site/keys/cosign.pub"}, "soaking: accept or revert"},
		{"accept interrupted", bg(Retired, StatusStarted, Switched, Accepted), key, bgScript + " accept", nil, "accept finishes"},
		{"revert interrupted", bg(Destroying, StatusStarted, Switched, SwitchedBack), key, bgScript + " revert", nil, "revert finishes"},
		{"in-place has no subcommand", &Transaction{Strategy: InPlace, Target: digest, Package: "/site/pkg.tar.zst", Phase: Deploying, Status: StatusStarted,
			Steps: []Step{{Phase: Deploying, Status: StatusStarted, Attempts: 1}}}, key,
			ScriptPath(InPlace) + " /site/pkg.tar.zst --key /site/keys/cosign.pub", nil, "deploys the target again"},
		{"in-place failed with nothing to restore closes", &Transaction{Strategy: InPlace, Target: digest, Package: "/site/pkg.tar.zst", Phase: Deploying, Status: StatusFailed,
			Slots: Slots{Active: "a"}, Steps: []Step{{Phase: Deploying, Status: StatusFailed, Error: "boom"}}}, key,
			"kubectl bundle-journal abort", nil, "no previous package is recorded for slot a: there is nothing to restore"},
		{"in-place deploy interrupted twice restores", &Transaction{Strategy: InPlace, Target: digest, Package: "/site/pkg.tar.zst", Phase: Deploying, Status: StatusStarted,
			Slots: Slots{Active: "a"}, Steps: []Step{{Phase: Deploying, Status: StatusStarted, Attempts: 2}}}, key,
			ScriptPath(InPlace) + " /site/pkg.tar.zst --key /site/keys/cosign.pub", nil, "interrupted 2 times (the deploy itself may be what stops the process): re-running the orchestrator restores the previous package into slot a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := NextWith(c.tx, c.v)
			if n.Command != c.want {
				t.Errorf("command %q, want %q", n.Command, c.want)
			}
			if strings.Join(n.Alternatives, "|") != strings.Join(c.alt, "|") {
				t.Errorf("alternatives %q, want %q", n.Alternatives, c.alt)
			}
			if !strings.Contains(n.Why, c.why) {
				t.Errorf("why %q lacks %q", n.Why, c.why)
			}
			if want := strings.Contains(c.why, "restores the previous package"); n.Restore != want {
				t.Errorf("restore %v, want %v", n.Restore, want)
			}
			if strings.Contains(n.Why, "interrupted") && c.why == "soaking: accept or revert" {
				t.Errorf("a normal soak reads as interrupted: %q", n.Why)
			}
		})
	}
}

// After the soak window, status says the soak is over and names accept
// with the material the transaction was begun with (keyless too); revert is
// offered only while the previous slot exists.
func TestNextAfterTheSoakWindow(t *testing.T) {
	ends := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tx := &Transaction{Strategy: BlueGreen, Target: strings.Repeat("1", 64), Package: "/site/pkg.tar.zst", Phase: Soaking, Status: StatusStarted,
		Slots: Slots{Active: "a", Candidate: "b"}, Steps: []Step{{Phase: Switched, Status: StatusDone}, {Phase: Soaking, Status: StatusStarted}}}
	script := ScriptPath(BlueGreen)
	keyless := &Verification{Identity: "ops@example.com", Issuer: "https://issuer.example", TrustedRoot: "/site/root.json"}
	material := " --certificate-identity ops@example.com --certificate-oidc-issuer https://issuer.example --trusted-root /site/root.json"
	n := NextWithSoak(tx, keyless, &Soak{Ends: ends, Over: true, RevertTarget: true})
	if n.Command != script+" accept"+material || strings.Join(n.Alternatives, "|") != script+" revert"+material ||
		!strings.Contains(n.Why, "the soak is over (its window ended 2026-01-02T03:04:05Z)") || strings.Contains(n.Why, "soaking:") {
		t.Errorf("soak over, a kept: %+v", n)
	}
	n = NextWithSoak(tx, &Verification{Key: "/k.pub"}, &Soak{Ends: ends, Over: true})
	if n.Command != script+" accept --key /k.pub" || len(n.Alternatives) != 0 || !strings.Contains(n.Why, "the soak is over") {
		t.Errorf("soak over, a gone: %+v", n)
	}
	n = NextWithSoak(tx, nil, &Soak{Ends: ends, RevertTarget: true})
	if len(n.Alternatives) != 1 || !strings.Contains(n.Why, "soaking: accept or revert") || !strings.Contains(n.Why, "window ends 2026-01-02T03:04:05Z") {
		t.Errorf("still soaking: %+v", n)
	}
}

// A transaction begun with the script's gate: the next command re-runs the
// script gating the same way (the flags it was run with).
func TestNextCarriesTheGate(t *testing.T) {
	tx := &Transaction{ID: "x", Strategy: InPlace, Target: strings.Repeat("1", 64), Package: "/p/pkg.tar.zst",
		Slots: Slots{Active: "a"}, Phase: Deploying, Status: StatusStarted, Gate: &Gate{File: "/g/gate file.yaml", Timeout: "1s"},
		Steps: []Step{{Phase: Deploying, Status: StatusStarted, Attempts: 1}}}
	n := NextWith(tx, &Verification{Key: "/k/cosign.pub"})
	if want := " /p/pkg.tar.zst --key /k/cosign.pub --gate '/g/gate file.yaml' --gate-timeout 1s"; !strings.HasSuffix(n.Command, want) {
		t.Errorf("next: %q, want it to end with %q", n.Command, want)
	}
	tx.Gate = nil
	if n := NextWith(tx, &Verification{Key: "/k/cosign.pub"}); strings.Contains(n.Command, "--gate") {
		t.Errorf("next without a gate: %q", n.Command)
	}
}

// A recovery step that is done while its slot fails its gate: the next
// command is that gate (with the transaction's gate file and timeout,
// recording the result), not a re-run that only gates the slot again and
// fails the same way; the re-run is the alternative, for once it passes.
func TestNextAfterTheRestoredSlotFailsItsGate(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	failing := &FailingGate{Slot: "a", Time: at, Failed: []string{"healthy"}}
	for _, c := range []struct {
		st    Strategy
		phase Phase
	}{{InPlace, Restoring}, {Recreate, BuildingFallback}} {
		tx := &Transaction{Strategy: c.st, Target: strings.Repeat("1", 64), Package: "/p/pkg.tar.zst", Phase: c.phase, Status: StatusDone,
			Slots: Slots{Active: "a"}, Gate: &Gate{File: "/site/my gate.yaml", Timeout: "1s"}}
		apply := ScriptPath(c.st) + " /p/pkg.tar.zst --key /k.pub --gate '/site/my gate.yaml' --gate-timeout 1s"
		n := NextWithGate(tx, &Verification{Key: "/k.pub"}, nil, failing)
		if n.Command != "kubectl bundle-gate --slot a --record -f '/site/my gate.yaml' --timeout 1s" ||
			strings.Join(n.Alternatives, "|") != apply || !strings.Contains(n.Why, "failed its gate at 2026-01-02T03:04:05Z (failing: healthy)") {
			t.Errorf("%s: %+v", c.phase, n)
		}
		// Not gated yet, or passed: the re-run goes on.
		if n := NextWithGate(tx, &Verification{Key: "/k.pub"}, nil, nil); n.Command != apply {
			t.Errorf("%s, no failing gate: %q, want %q", c.phase, n.Command, apply)
		}
		// The recovery step itself not done: the re-run finishes it.
		tx.Status = StatusStarted
		if n := NextWithGate(tx, &Verification{Key: "/k.pub"}, nil, failing); n.Command != apply {
			t.Errorf("%s started: %q, want %q", c.phase, n.Command, apply)
		}
	}
	// The gate file gone: not the gate with it (exit 2, no such file),
	// but the re-run with the run's material, gate file and timeout, and
	// where to restore the file (or pass another).
	for _, c := range []struct {
		st    Strategy
		phase Phase
	}{{InPlace, Restoring}, {Recreate, BuildingFallback}} {
		tx := &Transaction{Strategy: c.st, Target: strings.Repeat("1", 64), Package: "/p/pkg.tar.zst", Phase: c.phase, Status: StatusDone,
			Slots: Slots{Active: "a"}, Gate: &Gate{File: "/site/gate.yaml", Timeout: "1s"}}
		apply := ScriptPath(c.st) + " /p/pkg.tar.zst --key /k.pub --gate /site/gate.yaml --gate-timeout 1s"
		gone := errors.New("open /site/gate.yaml: no such file or directory")
		n := NextWithGateFile(tx, &Verification{Key: "/k.pub"}, nil, failing, gone)
		if n.Command != apply || len(n.Alternatives) != 0 || n.MissingGate != "/site/gate.yaml" ||
			!strings.Contains(n.Why, "restore it at /site/gate.yaml") || !strings.Contains(n.Why, "pass another gate") ||
			strings.Contains(n.Command+strings.Join(n.Alternatives, "|"), "bundle-gate") {
			t.Errorf("%s, gate file gone: %+v", c.phase, n)
		}
		// Readable: as before.
		if n := NextWithGateFile(tx, &Verification{Key: "/k.pub"}, nil, failing, nil); n.MissingGate != "" || !strings.HasPrefix(n.Command, "kubectl bundle-gate") {
			t.Errorf("%s, gate file there: %+v", c.phase, n)
		}
		// No failing gate: the re-run, saying the file is gone.
		if n := NextWithGateFile(tx, &Verification{Key: "/k.pub"}, nil, nil, gone); n.Command != apply || n.MissingGate == "" {
			t.Errorf("%s, no failing gate, file gone: %+v", c.phase, n)
		}
	}
	if got := GateCommand("b", nil); got != "kubectl bundle-gate --slot b --record" {
		t.Errorf("the built-in gate: %q", got)
	}
}
