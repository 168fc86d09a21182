package journal

import (
	"strings"
	"testing"
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
		{"keyless material, quoted", bg(Verified, StatusStarted), keyless,
			bgScript + " apply /site/pkg.tar.zst --certificate-identity ops@example.com --certificate-oidc-issuer https://issuer.example --trusted-root '/site/trusted root.json'", nil, "interrupted"},
		{"no material says what to add", bg(Healthy, StatusDone), nil,
			bgScript + " apply /site/pkg.tar.zst", nil, "--key ABS_PATH"},
		{"soaking after the switch", bg(Switched, StatusDone, Verified, Healthy), key,
			bgScript + " accept", []string{bgScript + " revert"}, "soaking: accept or revert"},
		{"soaking", bg(Soaking, StatusDone, Switched), nil,
			bgScript + " accept", []string{bgScript + " revert"}, "soaking: accept or revert"},
		{"soaking as the switch leaves it (started until accept)", bg(Soaking, StatusStarted, Switched), key,
			bgScript + " accept", []string{bgScript + " revert"}, "soaking: accept or revert"},
		{"accept interrupted", bg(Retired, StatusStarted, Switched, Accepted), key, bgScript + " accept", nil, "accept finishes"},
		{"revert interrupted", bg(Destroying, StatusStarted, Switched, SwitchedBack), key, bgScript + " revert", nil, "revert finishes"},
		{"in-place has no subcommand", &Transaction{Strategy: InPlace, Target: digest, Package: "/site/pkg.tar.zst", Phase: Deploying, Status: StatusStarted,
			Steps: []Step{{Phase: Deploying, Status: StatusStarted, Attempts: 1}}}, key,
			ScriptPath(InPlace) + " /site/pkg.tar.zst --key /site/keys/cosign.pub", nil, "deploys the target again"},
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
