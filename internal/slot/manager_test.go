package slot_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// freePort is a registry port base whose first slots' ports (base, base+1,
// ...: slots a-d) nothing on this host listens on, so that preflight's port
// check passes whatever else runs here. Only the base is free by
// construction; the ports after it are checked too: on a busy machine
// base+1 was once another process's (TestActiveSlotRebuiltKeepsTheRegistryAlias
// failed in a cold make test on "port ... is in use").
func freePort(t *testing.T) int {
	t.Helper()
	for try := 0; try < 100; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		free := true
		for i := 1; i < 4 && free; i++ {
			n, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				free = false
				continue
			}
			n.Close()
		}
		l.Close()
		if free {
			return base
		}
	}
	t.Fatal("no 4 consecutive free ports found in 100 tries")
	return 0
}

// newManager is a Manager on the fakes: a fresh state dir, an archives dir
// with an init package and one image archive, kind and docker and zarf
// faked.
func newManager(t *testing.T) (*slot.Manager, *fakes.Machine) {
	t.Helper()
	fm := fakes.Setup(t)
	root := t.TempDir()
	t.Setenv("WORK", root)
	d, err := state.Open(filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	archives := filepath.Join(root, "archives")
	if err := os.MkdirAll(archives, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"zarf-init-amd64-v0.84.0.tar.zst", "images.tar"} {
		if err := os.WriteFile(filepath.Join(archives, f), []byte("fake"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := slot.Defaults()
	cfg.Archives = archives
	cfg.RegistryPortBase = freePort(t)
	m := &slot.Manager{Dir: d, Config: &cfg, Run: fakes.Runner{}, Kind: fakes.Kind{},
		Kubeconfig: filepath.Join(root, "kubeconfig"), Probe: fakes.Probe, Sleep: func(time.Duration) {}}
	return m, fm
}

// stagePackage puts a package into the state dir as verify --stage leaves
// it, verified or not, and returns its digest.
func stagePackage(t *testing.T, d *state.Dir, content string, verified bool) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	digest := hex.EncodeToString(sum[:])
	dir := d.Join("packages", digest)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	name := "zarf-package-demo-amd64-1.0.0.tar.zst"
	v := "false"
	if verified {
		v = "true"
	}
	files := map[string]string{
		name:                content,
		name + ".sha256":    digest + "  " + name + "\n",
		"verification.json": `{"report":{"verified":` + v + `,"package":{"name":"demo","version":"1.0.0"},"signer":{"method":"key"}}}`,
	}
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return digest
}

func count(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestCreateDeployDestroy: the kind provider's steps, in order, against the
// fakes; the record, the fake machine and the slot's kubeconfig agree.
func TestCreateDeployDestroy(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	rec, err := m.Create(ctx, "a", slot.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != slot.StateReady || rec.Cluster != "airgap-mgmt-a" || rec.Context != "kind-airgap-mgmt-a" || rec.RegistryPort != m.Config.RegistryPortBase {
		t.Errorf("record: %+v", rec)
	}
	var steps []string
	for _, s := range rec.Steps {
		steps = append(steps, s.Name)
	}
	if got := strings.Join(steps, " "); got != "create/load-images create/cluster create/registry create/kubeconfig create/zarf-init" {
		t.Errorf("steps: %s", got)
	}
	st, err := fm.State()
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Containers["airgap-mgmt-a-control-plane"]; c == nil || !strings.HasPrefix(c.Image, "kindest/node:") {
		t.Errorf("no kind node container: %+v", st.Containers)
	}
	if c := st.Containers["krops-registry-airgap-a"]; c == nil || c.Network != "kind" || c.Labels["dev.kubectl-bundle.slot"] != "a" {
		t.Errorf("registry container: %+v", c)
	}
	// It comes back with the Docker engine (a host reboot).
	if c := st.Containers["krops-registry-airgap-a"]; c == nil || c.Restart != "unless-stopped" {
		t.Errorf("registry container's restart policy: %+v, want unless-stopped", c)
	}
	if strings.Join(st.Images, ",") != "images.tar" {
		t.Errorf("images loaded: %v", st.Images)
	}
	// zarf init ran against the slot's own kubeconfig, whose context is the slot's.
	if strings.Join(st.Inits, ",") != "kind-airgap-mgmt-a" {
		t.Errorf("inits: %v", st.Inits)
	}
	if _, err := os.Stat(slot.KubeconfigPath(m.Dir, "a")); err != nil {
		t.Errorf("slot kubeconfig: %v", err)
	}

	digest := stagePackage(t, m.Dir, "v1", true)
	rec, err = m.Deploy(ctx, "a", digest, slot.DeployOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Package == nil || rec.Package.Digest != digest || rec.Package.Name != "demo" || rec.Package.Version != "1.0.0" {
		t.Errorf("deployed package: %+v", rec.Package)
	}
	st, _ = fm.State()
	if len(st.Deploys) != 1 || st.Deploys[0].Context != "kind-airgap-mgmt-a" || strings.Join(st.Deploys[0].Variables, ",") != "SLOT=a" {
		t.Errorf("deploys: %+v", st.Deploys)
	}
	loaded, err := slot.Load(m.Dir, "a")
	if err != nil || loaded.Package == nil || loaded.Package.Digest != digest {
		t.Errorf("saved record: %+v (%v)", loaded, err)
	}

	if err := m.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	st, _ = fm.State()
	if len(st.Containers) != 0 {
		t.Errorf("containers left: %v", st.Containers)
	}
	var nf *slot.NotFoundError
	if _, err := slot.Load(m.Dir, "a"); !errors.As(err, &nf) {
		t.Errorf("record after destroy: %v", err)
	}
	if _, err := os.Stat(slot.KubeconfigPath(m.Dir, "a")); !os.IsNotExist(err) {
		t.Errorf("slot kubeconfig after destroy: %v", err)
	}
}

// TestCreateAndDestroyAreIdempotent: a second create with the same inputs
// is a no-op; a second destroy finds nothing to do and succeeds.
func TestCreateAndDestroyAreIdempotent(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); !errors.Is(err, slot.ErrAlreadyCreated) {
		t.Fatalf("second create: %v, want ErrAlreadyCreated", err)
	}
	if n := count(fm.Calls(), "kind create cluster"); n != 1 {
		t.Errorf("kind create ran %d times, want 1", n)
	}
	for i := 0; i < 2; i++ {
		if err := m.Destroy(ctx, "a"); err != nil {
			t.Fatalf("destroy %d: %v", i+1, err)
		}
	}
	if n := count(fm.Calls(), "kind delete cluster --name airgap-mgmt-a"); n != 2 {
		t.Errorf("kind delete ran %d times, want 2 (the second finds nothing)", n)
	}
}

// TestCreateFailsThenRebuilds: a failing zarf init leaves the slot failed
// with the step named; the next create cleans it up and builds it whole.
func TestCreateFailsThenRebuilds(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	t.Setenv(fakes.EnvFail, "zarf-init")
	_, err := m.Create(ctx, "a", slot.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "slot a: create/zarf-init:") || !strings.Contains(err.Error(), "(FAKE_FAIL)") {
		t.Fatalf("create with a failing zarf init: %v", err)
	}
	rec, err := slot.Load(m.Dir, "a")
	if err != nil || rec.State != slot.StateFailed {
		t.Fatalf("record after the failure: %+v (%v)", rec, err)
	}
	t.Setenv(fakes.EnvFail, "")
	rec, err = m.Create(ctx, "a", slot.CreateOptions{})
	if err != nil || rec.State != slot.StateReady {
		t.Fatalf("create after the failure: %+v (%v)", rec, err)
	}
	calls := fm.Calls()
	if count(calls, "kind delete cluster --name airgap-mgmt-a") != 1 || count(calls, "kind create cluster --name airgap-mgmt-a") != 2 {
		t.Errorf("want the half-built slot destroyed once and created twice:\n%s", strings.Join(calls, "\n"))
	}
	st, _ := fm.State()
	if len(st.Inits) != 1 {
		t.Errorf("inits: %v", st.Inits)
	}
}

// TestDeployFailureKeepsThePreviousPackage: a failing zarf deploy leaves
// the record naming the package deployed before, and says so.
func TestDeployFailureKeepsThePreviousPackage(t *testing.T) {
	m, _ := newManager(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1 := stagePackage(t, m.Dir, "v1", true)
	if _, err := m.Deploy(ctx, "a", v1, slot.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	v2 := stagePackage(t, m.Dir, "v2", true)
	t.Setenv(fakes.EnvFail, "zarf-deploy")
	_, err := m.Deploy(ctx, "a", v2, slot.DeployOptions{})
	if err == nil || !strings.Contains(err.Error(), "the slot's record still names its previous package ("+v1+")") {
		t.Fatalf("failed deploy: %v", err)
	}
	rec, _ := slot.Load(m.Dir, "a")
	if rec.Package == nil || rec.Package.Digest != v1 {
		t.Errorf("record after the failed deploy: %+v", rec.Package)
	}
	// What the slot holds is not known: a pass recorded before no longer
	// counts, until a gate passes again or a deploy finishes.
	if d := rec.Deploying; d == nil || d.Digest != v2 || d.Started.IsZero() || d.Failed.IsZero() || !strings.Contains(d.Error, "FAKE_FAIL") {
		t.Errorf("the failed deploy is not recorded: %+v", d)
	}
	rec.Gate = &slot.GateResult{Gate: "default", Passed: true, Time: time.Now(), Package: v1}
	if rec.Gated() {
		t.Errorf("a slot whose deploy failed counts as gated")
	}
	// Re-running the same deploy once zarf works is fine.
	t.Setenv(fakes.EnvFail, "")
	if rec, err := m.Deploy(ctx, "a", v2, slot.DeployOptions{}); err != nil || rec.Package.Digest != v2 || rec.Deploying != nil {
		t.Fatalf("deploy again: %v (%+v)", err, rec)
	}
}

// TestRefusals: what the manager refuses, with the error type the cmd
// layer maps to an exit code, and without touching the fake machine.
func TestRefusals(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	if _, err := m.Deploy(ctx, "a", stagePackage(t, m.Dir, "v1", true), slot.DeployOptions{}); !errors.As(err, new(*slot.NotFoundError)) {
		t.Errorf("deploy into a slot never created: %v", err)
	}
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An unverified package.
	var nv *slot.NotVerifiedError
	if _, err := m.Deploy(ctx, "a", stagePackage(t, m.Dir, "unverified", false), slot.DeployOptions{}); !errors.As(err, &nv) {
		t.Errorf("deploy of an unverified package: %v", err)
	}
	// Other settings.
	m.Config.RegistryImage = "registry:3.0.1"
	var se *slot.SettingsError
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); !errors.As(err, &se) || errkind.Of(err) != errkind.Conflict || !strings.Contains(err.Error(), "exists with other settings") {
		t.Errorf("create with other settings: %v", err)
	}
	// A slot that is not configured.
	var ce *slot.ConfigError
	if _, err := m.Create(ctx, "c", slot.CreateOptions{}); !errors.As(err, &ce) {
		t.Errorf("create of an unconfigured slot: %v", err)
	}
	st, _ := fm.State()
	if len(st.Deploys) != 0 || len(st.Containers) != 2 {
		t.Errorf("a refusal touched the machine: deploys %v, containers %d", st.Deploys, len(st.Containers))
	}
}

// TestDestroyDamagedRecord: a record that does not parse, or names another
// slot, is reported as damage with its repair, and destroy clears it and
// what the configured provider builds under the slot's names, without
// trusting its content.
func TestDestroyDamagedRecord(t *testing.T) {
	for _, content := range []string{"{garbage", `{"kind":"Slot","name":"b","provider":"kind","cluster":"victim"}`} {
		m, fm := newManager(t)
		ctx := context.Background()
		if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := m.Dir.Join("slots", "a.json")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := slot.Load(m.Dir, "a")
		var dmg *slot.DamagedError
		if !errors.As(err, &dmg) || !strings.Contains(err.Error(), "kubectl bundle-slot destroy a --force") {
			t.Fatalf("load of %q: %v", content, err)
		}
		if err := m.Destroy(ctx, "a"); err != nil {
			t.Fatalf("destroy of a damaged record: %v", err)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the damaged record is still there: %v", err)
		}
		if n := count(fm.Calls(), "kind delete cluster --name airgap-mgmt-a"); n != 1 {
			t.Errorf("kind delete of the slot's own cluster ran %d times, want 1", n)
		}
		if n := count(fm.Calls(), "victim"); n != 0 {
			t.Errorf("destroy trusted the damaged record's cluster name")
		}
	}
}

// TestImagesResolveOffline: the node and registry images are references
// Docker resolves from what the archives loaded (a tag, never a digest that
// sends Docker to a registry); a NAME:TAG@sha256:ID pin is checked against
// the loaded image's ID and stripped before kind and docker run see it; a
// missing image stops create before any cluster exists; the registry's
// health is checked over its published port, with no health command that
// the image would have to carry.
func TestImagesResolveOffline(t *testing.T) {
	ctx := context.Background()
	for _, ref := range []string{slot.Defaults().NodeImage, slot.Defaults().RegistryImage} {
		if strings.Contains(ref, "@") {
			t.Errorf("default image %s is a digest reference: a docker-save archive keeps no repository digest", ref)
		}
	}

	// A pin that is not the loaded image's ID.
	m, fm := newManager(t)
	m.Config.NodeImage = "kindest/node:v1.36.4@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	_, err := m.Create(ctx, "a", slot.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "image kindest/node:v1.36.4 is "+fakes.FakeImageID("kindest/node:v1.36.4")+", not the pinned sha256:0000") {
		t.Errorf("create with a wrong pin: %v", err)
	}
	if st, _ := fm.State(); len(st.Containers) != 0 {
		t.Errorf("a wrong pin left containers: %v", st.Containers)
	}

	// The right pin: kind and docker run get the name without it.
	m, fm = newManager(t)
	m.Config.NodeImage = "kindest/node:v1.36.4@" + fakes.FakeImageID("kindest/node:v1.36.4")
	m.Config.RegistryImage = "registry:3@" + fakes.FakeImageID("registry:3")
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := fm.State()
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Containers["airgap-mgmt-a-control-plane"]; c == nil || c.Image != "kindest/node:v1.36.4" {
		t.Errorf("node container: %+v", c)
	}
	reg := st.Containers["krops-registry-airgap-a"]
	if reg == nil || reg.Image != "registry:3" {
		t.Errorf("registry container: %+v", reg)
	}
	calls := strings.Join(fm.Calls(), "\n")
	for _, want := range []string{"docker image inspect --format {{.Id}} kindest/node:v1.36.4", "docker image inspect --format {{.Id}} registry:3"} {
		if !strings.Contains(calls, want) {
			t.Errorf("calls lack %q:\n%s", want, calls)
		}
	}
	if strings.Contains(calls, "--health-cmd") {
		t.Errorf("the registry runs with a health command its image may not carry:\n%s", calls)
	}

	// An image that is not loaded: create stops before the cluster.
	m, fm = newManager(t)
	t.Setenv(fakes.EnvFail, "docker-image")
	_, err = m.Create(ctx, "a", slot.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "image kindest/node:v1.36.4 is not loaded") {
		t.Errorf("create without the node image: %v", err)
	}
	if st, _ := fm.State(); len(st.Containers) != 0 {
		t.Errorf("a missing image left containers: %v", st.Containers)
	}
}

// TestRegistryHealthOverPublishedPort: a registry that never answers GET
// /v2/ on its published port fails create with the URL and the way to see why.
func TestRegistryHealthOverPublishedPort(t *testing.T) {
	m, _ := newManager(t)
	probes := 0
	m.Probe = func(_ context.Context, url string) error {
		probes++
		return errors.New("connection refused")
	}
	_, err := m.Create(context.Background(), "a", slot.CreateOptions{})
	want := "registry krops-registry-airgap-a is not healthy: GET http://127.0.0.1:"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "docker logs krops-registry-airgap-a") {
		t.Errorf("create with a registry that never answers: %v", err)
	}
	if probes != 30 {
		t.Errorf("probed %d times, want 30", probes)
	}
}

// TestZarfRegistrySlot: zarfRegistry slot makes zarf init use the slot's
// registry as zarf's external registry (127.0.0.1:<the slot's port>), the
// node's containerd pulls that name from the registry's container, and the
// default stays zarf's own NodePort registry.
func TestZarfRegistrySlot(t *testing.T) {
	ctx := context.Background()
	m, fm := newManager(t)
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(fm.Calls(), "\n")
	if !strings.Contains(calls, "--registry-mode=nodeport --components= --confirm") || strings.Contains(calls, "--registry-url") {
		t.Errorf("default zarf init:\n%s", calls)
	}
	m, fm = newManager(t)
	m.Config.ZarfRegistry = slot.ZarfRegistrySlot
	var wrote string
	m.WriteRegistryService = func(_ context.Context, kubeconfig, kubeContext, ip, slotName string) error {
		wrote = fmt.Sprintf("%s %s %s %s", filepath.Base(kubeconfig), kubeContext, ip, slotName)
		return nil
	}
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods reach the registry by zarf's registry's in-cluster name, whose
	// endpoint is the registry container's address on the kind network.
	if !regexp.MustCompile(`^kubeconfig kind-airgap-mgmt-a 172\.18\.\d+\.\d+ a$`).MatchString(wrote) {
		t.Errorf("the registry's Service was written as %q", wrote)
	}
	port := m.Config.RegistryPortBase
	want := fmt.Sprintf("--registry-mode=external --registry-url=127.0.0.1:%d --registry-push-username=kubectl-bundle --registry-push-password=kubectl-bundle --components= --confirm", port)
	if calls := strings.Join(fm.Calls(), "\n"); !strings.Contains(calls, want) {
		t.Errorf("zarf init with zarfRegistry slot lacks %q:\n%s", want, calls)
	}
	n, err := m.Config.NamesFor("a")
	if err != nil {
		t.Fatal(err)
	}
	cfg := slot.KindConfig(m.Config, n)
	wantPatch := fmt.Sprintf(`mirrors."127.0.0.1:%d"]`+"\n"+`  endpoint = ["http://krops-registry-airgap-a:5000"]`, port)
	if len(cfg.ContainerdConfigPatches) != 1 || !strings.Contains(cfg.ContainerdConfigPatches[0], wantPatch) {
		t.Errorf("containerd patches %q lack %q", cfg.ContainerdConfigPatches, wantPatch)
	}
	m.Config.ZarfRegistry = "harbor"
	if _, err := slot.LoadConfig(filepath.Join(t.TempDir(), "none.yaml"), func(string) string { return "" }, map[string]string{"zarfRegistry": "harbor"}); err == nil || !strings.Contains(err.Error(), `zarfRegistry "harbor": use nodeport or slot`) {
		t.Errorf("zarfRegistry harbor: %v", err)
	}
}

// TestActiveSlotRebuiltKeepsTheRegistryAlias: the registry container of the
// active slot, created again (recreate's BUILDING), carries the registry
// alias from its start; another slot's does not.
func TestActiveSlotRebuiltKeepsTheRegistryAlias(t *testing.T) {
	ctx := context.Background()
	m, fm := newManager(t)
	for _, s := range []string{"a", "b"} {
		if _, err := m.Create(ctx, s, slot.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := state.WriteFile(m.Dir.Join(record.ActiveFile), []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if err := fm.ResetCalls(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if err := m.Destroy(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Create(ctx, s, slot.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var runs []string
	for _, c := range fm.Calls() {
		if strings.HasPrefix(c, "docker run ") {
			runs = append(runs, c)
		}
	}
	if len(runs) != 2 || !strings.Contains(runs[0], "--name krops-registry-airgap-a --network kind --network-alias krops-registry ") ||
		strings.Contains(runs[1], "--network-alias") {
		t.Errorf("registry runs after rebuilding a (active) and b:\n%s", strings.Join(runs, "\n"))
	}
	st, err := fm.State()
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Containers["krops-registry-airgap-a"]; c == nil || !slices.Contains(c.Aliases, "krops-registry") {
		t.Errorf("the active slot's new registry container lacks the alias: %+v", c)
	}
}

// TestDeployWritesAMissingSlotKubeconfigAgain (found by TestModel): the
// slots directory lost and slot a's record rebuilt by slot repair, the
// slot's kubeconfig was not there, and zarf deployed with no cluster
// (with the real zarf: KUBECONFIG's default, another cluster). The file
// is written again from the record's kubeconfig and context first.
func TestDeployWritesAMissingSlotKubeconfigAgain(t *testing.T) {
	m, fm := newManager(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(slot.KubeconfigPath(m.Dir, "a")); err != nil {
		t.Fatal(err)
	}
	digest := stagePackage(t, m.Dir, "v1", true)
	if _, err := m.Deploy(ctx, "a", digest, slot.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ := fm.State()
	if len(st.Deploys) != 1 || st.Deploys[0].Context != "kind-airgap-mgmt-a" {
		t.Errorf("deploys: %+v, want one into kind-airgap-mgmt-a", st.Deploys)
	}
	if _, err := os.Stat(slot.KubeconfigPath(m.Dir, "a")); err != nil {
		t.Errorf("slot kubeconfig after the deploy: %v", err)
	}
}

// Flux names are written into a slot created before without them, but
// not into one that holds a package: its Flux reconciles names already,
// and new ones would have it delete the workload clusters it made (found
// running Flux on the bench: slot a renamed, its Cluster deleted).
func TestCreateKeepsTheFluxNamesOfASlotThatHoldsAPackage(t *testing.T) {
	m, _ := newManager(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, "a", slot.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, err := slot.Load(m.Dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	rec.Package = &record.PackageRef{Digest: strings.Repeat("1", 64), Deployed: time.Now()}
	if err := slot.Save(m.Dir, rec); err != nil {
		t.Fatal(err)
	}
	names := []record.FluxSetting{{Namespace: "flux-system", Variable: "WORKLOAD_CLUSTER_NAME", Value: "local-workload-a", Default: "local-workload"}}
	_, err = m.Create(ctx, "a", slot.CreateOptions{Flux: names})
	if errkind.Of(err) != errkind.Conflict || !strings.Contains(fmt.Sprint(err), "would have Flux delete the workload clusters") {
		t.Fatalf("create --package on a slot holding a package: %v (kind %v), want a conflict naming what Flux would delete", err, errkind.Of(err))
	}
	after, err := slot.Load(m.Dir, "a")
	if err != nil || len(after.Flux) != 0 {
		t.Fatalf("the record's Flux names after the refusal: %v (%v), want none", after.Flux, err)
	}
}
