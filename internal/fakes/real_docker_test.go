package fakes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTemplatesAgainstRealDocker runs every --format template the fake
// docker answers against a real Docker engine and the fake, on the same
// container (made with the flags the slot code uses), and fails where the
// fake's answer has another shape than the engine's. hack/e2e-kind.sh runs
// it (KB_REAL_DOCKER=1, KB_REAL_DOCKER_IMAGE=an image the engine has,
// a network named by KB_REAL_DOCKER_NETWORK, default kind); a template
// added to the fake without a case here fails it.
func TestTemplatesAgainstRealDocker(t *testing.T) {
	if os.Getenv("KB_REAL_DOCKER") != "1" {
		t.Skip("needs a real Docker engine: run by hack/e2e-kind.sh (make test, make e2e-kind) with KB_REAL_DOCKER=1")
	}
	image := os.Getenv("KB_REAL_DOCKER_IMAGE")
	network := os.Getenv("KB_REAL_DOCKER_NETWORK")
	if network == "" {
		network = "kind"
	}
	if image == "" {
		t.Fatal("KB_REAL_DOCKER_IMAGE: name an image the engine has")
	}
	m, err := NewMachine(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fake := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		e := env(func(k string) string {
			if k == EnvDir {
				return m.Dir
			}
			return ""
		})
		if rc := docker(e, args, &out, &errb); rc != 0 {
			t.Fatalf("fake docker %s: exit %d: %s", strings.Join(args, " "), rc, errb.String())
		}
		return out.String()
	}
	real := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, msg)
		}
		return string(out)
	}

	name := fmt.Sprintf("kb-fakecheck-%d", os.Getpid())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	run := []string{"run", "-d", "--name", name, "--network", network, "-p", fmt.Sprintf("127.0.0.1:%d:5000", port),
		"--label", "dev.kubectl-bundle.e2e=1", image}
	real(run...)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	fake(run...)

	checked := map[string]bool{}
	check := func(cmd, format string, test func()) {
		t.Run(cmd+" "+format, func(t *testing.T) { test() })
		checked[cmd+"\x00"+format] = true
	}
	lineOf := func(out, prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix+"\t") {
				return l
			}
		}
		return ""
	}

	check("info", formatJSON, func() {
		var r, f map[string]any
		if err := json.Unmarshal([]byte(real("info", "--format", formatJSON)), &r); err != nil {
			t.Fatalf("real docker info: %v", err)
		}
		if err := json.Unmarshal([]byte(fake("info", "--format", formatJSON)), &f); err != nil {
			t.Fatalf("fake docker info: %v", err)
		}
		for k, fv := range f {
			rv, ok := r[k]
			if !ok {
				t.Errorf("docker info: the fake prints %s, the engine does not", k)
				continue
			}
			if fmt.Sprintf("%T", rv) != fmt.Sprintf("%T", fv) {
				t.Errorf("docker info %s: the engine's is a %T (%v), the fake's a %T (%v)", k, rv, rv, fv, fv)
			}
		}
	})
	for _, all := range []bool{false, true} {
		args := []string{"ps", "--format", formatPS}
		if all {
			args = []string{"ps", "-a", "--format", formatPS}
		}
		check("ps", formatPS, func() {
			r, f := lineOf(real(args...), name), lineOf(fake(args...), name)
			want := fmt.Sprintf("%s\t127.0.0.1:%d->5000/tcp", name, port)
			if r != want || f != want {
				t.Errorf("docker %s: engine %q, fake %q, want both %q", strings.Join(args, " "), r, f, want)
			}
		})
	}
	check("ps", "", func() {
		if !strings.Contains(real("ps"), name) || !strings.Contains(fake("ps"), name) {
			t.Errorf("docker ps does not list %s", name)
		}
	})
	check("stats", formatStats, func() {
		shape := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\t[0-9.]+[KMGT]?i?B / [0-9.]+[KMGT]?i?B$`)
		r := lineOf(real("stats", "--no-stream", "--format", formatStats), name)
		f := lineOf(fake("stats", "--no-stream", "--format", formatStats), name)
		if !shape.MatchString(r) || !shape.MatchString(f) {
			t.Errorf("docker stats: engine %q, fake %q, want both NAME<TAB>USED / LIMIT", r, f)
		}
	})
	check("inspect", formatNetworks, func() {
		alias := name + "-alias"
		for _, do := range []func(...string) string{real, fake} {
			do("network", "disconnect", network, name)
			do("network", "connect", "--alias", alias, network, name)
		}
		var r, f map[string]struct{ Aliases []string }
		if err := json.Unmarshal([]byte(real("inspect", "--format", formatNetworks, name)), &r); err != nil {
			t.Fatalf("real docker inspect: %v", err)
		}
		if err := json.Unmarshal([]byte(fake("inspect", "--format", formatNetworks, name)), &f); err != nil {
			t.Fatalf("fake docker inspect: %v", err)
		}
		for what, nets := range map[string]map[string]struct{ Aliases []string }{"engine": r, "fake": f} {
			if len(nets) != 1 {
				t.Errorf("%s: networks %v, want only %s", what, nets, network)
			}
			if !slices.Contains(nets[network].Aliases, alias) {
				t.Errorf("%s: aliases on %s are %v, want %s among them", what, network, nets[network].Aliases, alias)
			}
		}
		for _, do := range []func(...string) string{real, fake} {
			do("network", "disconnect", network, name)
		}
		real("network", "connect", network, name)
		fake("network", "connect", network, name)
	})
	check("inspect", formatImage, func() {
		r, f := real("inspect", "--format", formatImage, name), fake("inspect", "--format", formatImage, name)
		id := strings.TrimSpace(real("image", "inspect", "--format", formatID, image))
		if want := image + "\t" + id + "\n"; r != want {
			t.Errorf("docker inspect: engine %q, want %q (the reference, then the image ID)", r, want)
		}
		shape := regexp.MustCompile(`^` + regexp.QuoteMeta(image) + `\tsha256:[0-9a-f]{64}\n$`)
		if !shape.MatchString(f) {
			t.Errorf("docker inspect: fake %q, want REFERENCE<TAB>sha256:<64 hex>", f)
		}
	})
	check("image inspect", formatID, func() {
		id := regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)
		r, f := real("image", "inspect", "--format", formatID, image), fake("image", "inspect", "--format", formatID, image)
		if !id.MatchString(r) || !id.MatchString(f) {
			t.Errorf("docker image inspect: engine %q, fake %q, want both sha256:<64 hex>", r, f)
		}
	})

	for cmd, c := range dockerCommands {
		for _, format := range c.formats {
			if format != "" && !checked[cmd+"\x00"+format] {
				t.Errorf("the fake answers docker %s --format %q, which this test does not check against the engine", cmd, format)
			}
		}
	}
}
