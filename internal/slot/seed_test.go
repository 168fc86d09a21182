package slot_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// TestCreateSeedsTheSlotsRegistry: create pushes the configured Flux
// artifact and chart into the slot's own registry (a working in-process
// registry here), records each digest in the slot's record and the
// history, and a rebuild of the slot pushes nothing the registry has.
func TestCreateSeedsTheSlotsRegistry(t *testing.T) {
	m, _ := newManager(t)
	var mu sync.Mutex
	var writes []string
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			mu.Lock()
			writes = append(writes, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	var asked []int
	m.RegistryAddr = func(port int) string { asked = append(asked, port); return u.Host }
	m.Journal = journal.New(m.Dir)

	cfgDir := filepath.Join(m.Config.Archives, "config-artifact", "workload")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "kustomization.yaml"), []byte("resources: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var chart bytes.Buffer
	zw := gzip.NewWriter(&chart)
	tw := tar.NewWriter(zw)
	body := "apiVersion: v2\nname: podinfo\nversion: 6.14.0\n"
	_ = tw.WriteHeader(&tar.Header{Name: "podinfo/Chart.yaml", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte(body))
	tw.Close()
	zw.Close()
	if err := os.MkdirAll(filepath.Join(m.Config.Archives, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Config.Archives, "charts", "podinfo-6.14.0.tgz"), chart.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Config.Seed = []seed.Entry{
		{Ref: "krops:latest", Path: "config-artifact"},
		{Ref: "stefanprodan/charts", Path: "charts/podinfo-6.14.0.tgz"},
	}

	ctx := context.Background()
	rec, err := m.Create(ctx, "a", slot.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range rec.Steps {
		steps = append(steps, s.Name)
	}
	if got := strings.Join(steps, " "); got != "create/load-images create/cluster create/registry create/seed create/kubeconfig create/zarf-init" {
		t.Errorf("steps: %s", got)
	}
	if len(asked) != 1 || asked[0] != m.Config.RegistryPortBase {
		t.Errorf("seeded the registry on ports %v, want slot a's %d", asked, m.Config.RegistryPortBase)
	}
	saved, err := slot.Load(m.Dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Seeded) != 2 || saved.Seeded[0].Ref != "krops:latest" || saved.Seeded[1].Ref != "stefanprodan/charts/podinfo:6.14.0" {
		t.Fatalf("record's seeded: %+v", saved.Seeded)
	}
	for _, s := range saved.Seeded {
		repo, tag, _ := strings.Cut(s.Ref, ":")
		req, _ := http.NewRequest(http.MethodHead, srv.URL+"/v2/"+repo+"/manifests/"+tag, nil)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Docker-Content-Digest"); got != s.Digest || !s.Pushed {
			t.Errorf("%s: registry has %s, record %s (pushed %v)", s.Ref, got, s.Digest, s.Pushed)
		}
	}
	hist, err := journal.ReadHistory(m.Dir.Join(journal.Dir, journal.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var seeds []string
	for _, ev := range hist.Events {
		if strings.HasPrefix(ev.Detail, "seed ") {
			seeds = append(seeds, ev.Detail+" "+ev.Status)
		}
	}
	want := "seed krops:latest@" + saved.Seeded[0].Digest + " pushed|seed stefanprodan/charts/podinfo:6.14.0@" + saved.Seeded[1].Digest + " pushed"
	if got := strings.Join(seeds, "|"); got != want {
		t.Errorf("history:\n%s\nwant:\n%s", got, want)
	}

	// Destroyed and created again with a registry that kept its content
	// (as a registry volume would): the digests are there, nothing is sent.
	if err := m.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	writes = nil
	mu.Unlock()
	rec, err = m.Create(ctx, "a", slot.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Seeded) != 2 || rec.Seeded[0].Pushed || rec.Seeded[1].Pushed || rec.Seeded[0].Digest != saved.Seeded[0].Digest {
		t.Errorf("second seed: %+v", rec.Seeded)
	}
	mu.Lock()
	if len(writes) != 0 {
		t.Errorf("a second seed wrote to the registry: %v", writes)
	}
	mu.Unlock()

	// What discarding the slot loses: not what the archives seed again,
	// unless its tag now holds something else.
	put := func(repoTag string) {
		t.Helper()
		repo, tag, _ := strings.Cut(repoTag, ":")
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v2/"+repo+"/manifests/"+tag, strings.NewReader(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`))
		req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("PUT %s: %v %v", repoTag, err, resp)
		}
		resp.Body.Close()
	}
	put("bench/workload:1")
	l, err := m.Losses(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.Repositories, " "); got != "bench/workload:1" {
		t.Errorf("losses list %q, want only what was not seeded", got)
	}
	if got := strings.Join(l.Seeded, " "); got != "krops:latest stefanprodan/charts/podinfo:6.14.0" {
		t.Errorf("losses' seeded %q", got)
	}
	put("krops:latest")
	if l, err = m.Losses(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.Repositories, " "); got != "bench/workload:1 krops:latest" {
		t.Errorf("a seeded tag that holds something else now: losses list %q", got)
	}
}

// TestCreateFailsOnASeedItCannotPush: a registry that refuses writes
// stops create at its seed step; the slot is left failed, so the next
// create rebuilds it.
func TestCreateFailsOnASeedItCannotPush(t *testing.T) {
	m, _ := newManager(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "read-only", http.StatusForbidden)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	m.RegistryAddr = func(int) string { return u.Host }
	dir := filepath.Join(m.Config.Archives, "cfg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "k.yaml"), []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Config.Seed = []seed.Entry{{Ref: "krops:latest", Path: "cfg"}}
	_, err := m.Create(context.Background(), "a", slot.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "create/seed") || !strings.Contains(err.Error(), "pushing krops:latest") {
		t.Fatalf("create against a read-only registry: %v", err)
	}
	rec, err := slot.Load(m.Dir, "a")
	if err != nil || rec.State != slot.StateFailed {
		t.Fatalf("record after the failed seed: %+v %v", rec, err)
	}
}
