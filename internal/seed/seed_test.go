package seed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// countingRegistry is a working in-memory registry that counts the
// requests that write, and can serve a changed manifest.
type countingRegistry struct {
	mu     sync.Mutex
	writes []string
	tamper bool
	h      http.Handler
}

func (c *countingRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.mu.Lock()
		c.writes = append(c.writes, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
	}
	c.mu.Lock()
	tamper := c.tamper
	c.mu.Unlock()
	if tamper && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/") && !strings.Contains(r.URL.Path, "sha256:") {
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, r)
		body := bytes.Replace(rec.Body.Bytes(), []byte(`"schemaVersion":2`), []byte(`"schemaVersion": 2`), 1)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
		return
	}
	c.h.ServeHTTP(w, r)
}

func (c *countingRegistry) takeWrites() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

func newRegistry(t *testing.T) (*countingRegistry, string) {
	t.Helper()
	c := &countingRegistry{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return c, u.Host
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// chartArchive is a Helm chart archive as helm package writes one.
func chartArchive(t *testing.T, name, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{
		{name + "/Chart.yaml", "apiVersion: v2\nname: " + name + "\nversion: " + version + "\ndescription: a test chart\n"},
		{name + "/values.yaml", "replicaCount: 1\n"},
		{name + "/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// getManifest fetches REPO:TAG over the distribution API.
func getManifest(t *testing.T, host, repo, tag string) (ocispec.Manifest, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/v2/"+repo+"/manifests/"+tag, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s:%s: %s", repo, tag, resp.Status)
	}
	var m ocispec.Manifest
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m, resp.Header.Get("Docker-Content-Digest")
}

func getBlob(t *testing.T, host, repo string, d ocispec.Descriptor) []byte {
	t.Helper()
	resp, err := http.Get("http://" + host + "/v2/" + repo + "/blobs/" + d.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// layout writes an OCI layout with one tagged manifest, as oras or
// skopeo copy --to-oci-layout leave one.
func layout(t *testing.T, dir, tag string) ocispec.Descriptor {
	t.Helper()
	ctx := context.Background()
	store, err := oci.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := oras.PushBytes(ctx, store, "application/vnd.example.data", []byte("payload of "+tag))
	if err != nil {
		t.Fatal(err)
	}
	root, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "application/vnd.example.artifact",
		oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}, ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: "2026-01-01T00:00:00Z"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Tag(ctx, root, tag); err != nil {
		t.Fatal(err)
	}
	return root
}

// tarOf writes dir's files into a plain tar at p.
func tarOf(t *testing.T, dir, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, _ := os.ReadFile(path)
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	f.Close()
}

// TestPushSeedsWhatTheSiteScriptPushes: the Flux config artifact, Helm
// charts and OCI layouts (directory and tar) land in a working registry
// under their refs, with the media types Flux and Helm select, each checked
// by digest; a second seed sends nothing.
func TestPushSeedsWhatTheSiteScriptPushes(t *testing.T) {
	ctx := context.Background()
	reg, host := newRegistry(t)
	archives := t.TempDir()
	writeFiles(t, filepath.Join(archives, "config-artifact"), map[string]string{
		"workload/local-host/kustomization.yaml": "resources: [podinfo.yaml]\n",
		"workload/local-host/podinfo.yaml":       "kind: HelmRelease\n",
	})
	chart := chartArchive(t, "podinfo", "6.14.0")
	if err := os.MkdirAll(filepath.Join(archives, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(archives, "charts", "podinfo-6.14.0.tgz"), chart, 0o644); err != nil {
		t.Fatal(err)
	}
	want := layout(t, filepath.Join(archives, "layout"), "v1")
	tarOf(t, filepath.Join(archives, "layout"), filepath.Join(archives, "layout.tar"))

	entries := []Entry{
		{Ref: "krops:latest", Path: "config-artifact", Source: "airgap-bundle", Revision: "airgap@sha1:abc"},
		{Ref: "stefanprodan/charts", Path: "charts/podinfo-6.14.0.tgz"},
		{Ref: "extra/layout:v1", Path: "layout"},
		{Ref: "extra/fromtar:v1", Path: filepath.Join(archives, "layout.tar")},
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var first []*Result
	for _, e := range entries {
		res, err := Push(ctx, host, archives, e, Options{PlainHTTP: true, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatalf("%s: %v", e.Ref, err)
		}
		if !res.Pushed {
			t.Errorf("%s: not pushed into an empty registry", e.Ref)
		}
		first = append(first, res)
	}
	if len(reg.takeWrites()) == 0 {
		t.Fatal("the registry saw no write")
	}

	// The Flux artifact: Flux's media types, the directory's files.
	m, dgst := getManifest(t, host, "krops", "latest")
	if dgst != first[0].Digest || first[0].Kind != KindFluxArtifact || first[0].Ref != "krops:latest" {
		t.Errorf("krops:latest is %s, result %+v", dgst, first[0])
	}
	if m.Config.MediaType != FluxConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != FluxContentType {
		t.Errorf("flux artifact manifest %+v", m)
	}
	if m.Annotations[ocispec.AnnotationRevision] != "airgap@sha1:abc" || m.Annotations[ocispec.AnnotationSource] != "airgap-bundle" {
		t.Errorf("flux artifact annotations %v", m.Annotations)
	}
	zr, err := gzip.NewReader(bytes.NewReader(getBlob(t, host, "krops", m.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "workload/ workload/local-host/ workload/local-host/kustomization.yaml workload/local-host/podinfo.yaml" {
		t.Errorf("flux artifact holds %s", got)
	}

	// The chart: pushed as helm push does (REPO/NAME:VERSION), the archive
	// itself the layer, Chart.yaml the config.
	m, dgst = getManifest(t, host, "stefanprodan/charts/podinfo", "6.14.0")
	if first[1].Ref != "stefanprodan/charts/podinfo:6.14.0" || dgst != first[1].Digest || first[1].Kind != KindHelmChart {
		t.Errorf("chart result %+v, registry digest %s", first[1], dgst)
	}
	if m.Config.MediaType != HelmConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != HelmChartMediaType {
		t.Errorf("chart manifest %+v", m)
	}
	if !bytes.Equal(getBlob(t, host, "stefanprodan/charts/podinfo", m.Layers[0]), chart) {
		t.Error("the chart layer is not the chart archive")
	}
	var cfg map[string]any
	if err := json.Unmarshal(getBlob(t, host, "stefanprodan/charts/podinfo", m.Config), &cfg); err != nil || cfg["name"] != "podinfo" || cfg["version"] != "6.14.0" {
		t.Errorf("chart config %v (%v)", cfg, err)
	}

	// The layouts: the very manifest the layout holds.
	for i, repo := range []string{"extra/layout", "extra/fromtar"} {
		_, dgst = getManifest(t, host, repo, "v1")
		if dgst != want.Digest.String() || first[2+i].Digest != dgst || first[2+i].Kind != KindOCILayout {
			t.Errorf("%s:v1 is %s, want the layout's %s (result %+v)", repo, dgst, want.Digest, first[2+i])
		}
	}

	// Idempotent: the same seed again finds every digest and writes nothing.
	for i, e := range entries {
		res, err := Push(ctx, host, archives, e, Options{PlainHTTP: true})
		if err != nil {
			t.Fatalf("again %s: %v", e.Ref, err)
		}
		if res.Pushed || res.Digest != first[i].Digest {
			t.Errorf("again %s: pushed %v digest %s, first %s", e.Ref, res.Pushed, res.Digest, first[i].Digest)
		}
	}
	if w := reg.takeWrites(); len(w) != 0 {
		t.Errorf("a second seed wrote to the registry: %v", w)
	}
}

// TestFluxArtifactIsReproducible: the same files give the same digest
// whatever their times and modes, and another file content another one.
func TestFluxArtifactIsReproducible(t *testing.T) {
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	writeFiles(t, a, map[string]string{"x/k.yaml": "a: 1\n", "y.yaml": "b: 2\n"})
	writeFiles(t, b, map[string]string{"y.yaml": "b: 2\n", "x/k.yaml": "a: 1\n"})
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	_ = os.Chtimes(filepath.Join(b, "y.yaml"), old, old)
	_ = os.Chmod(filepath.Join(b, "y.yaml"), 0o600)
	sa, err := buildFlux(ctx, a, "krops", "latest", Entry{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := buildFlux(ctx, b, "krops", "latest", Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if sa.root.Digest != sb.root.Digest {
		t.Errorf("the same files gave %s and %s", sa.root.Digest, sb.root.Digest)
	}
	writeFiles(t, b, map[string]string{"y.yaml": "b: 3\n"})
	sc, err := buildFlux(ctx, b, "krops", "latest", Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.root.Digest == sa.root.Digest {
		t.Error("changed content kept its digest")
	}
}

// TestPushChecksTheDigestAfterThePush: a registry that serves other bytes
// for the tag than were pushed fails the seed (an environment failure).
func TestPushChecksTheDigestAfterThePush(t *testing.T) {
	ctx := context.Background()
	reg, host := newRegistry(t)
	dir := t.TempDir()
	writeFiles(t, filepath.Join(dir, "cfg"), map[string]string{"k.yaml": "a: 1\n"})
	reg.tamper = true
	_, err := Push(ctx, host, dir, Entry{Ref: "krops:latest", Path: "cfg"}, Options{PlainHTTP: true})
	var se *Error
	if !errors.As(err, &se) || se.ErrorKind() != errkind.Environment || !strings.Contains(err.Error(), "checking krops:latest after the push") {
		t.Fatalf("a registry serving changed bytes: %v", err)
	}
}

// TestPushRefusesWhatItCannotRead: sources and refs that are wrong are
// usage errors naming the entry, before anything is sent.
func TestPushRefusesWhatItCannotRead(t *testing.T) {
	ctx := context.Background()
	reg, host := newRegistry(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "podinfo-6.14.0.tgz"), chartArchive(t, "podinfo", "6.14.0"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	layout(t, filepath.Join(dir, "two"), "v1")
	layout(t, filepath.Join(dir, "two"), "v2")
	for _, c := range []struct {
		e    Entry
		want string
	}{
		{Entry{Ref: "charts/podinfo:6.13.0", Path: "podinfo-6.14.0.tgz"}, "does not name chart podinfo 6.14.0"},
		{Entry{Ref: "charts:1", Path: "podinfo-6.14.0.tgz"}, "give the repository alone"},
		{Entry{Ref: "krops:latest", Path: "missing"}, "no such file"},
		{Entry{Ref: "krops:latest", Path: "notes.txt"}, "neither a directory"},
		{Entry{Ref: "host.example:5000/krops@sha256:00", Path: "podinfo-6.14.0.tgz"}, "without a host"},
		{Entry{Ref: "extra:v3", Path: "two"}, "holds 2 manifests (tags v1, v2)"},
	} {
		_, err := Push(ctx, host, dir, c.e, Options{PlainHTTP: true})
		var se *Error
		if !errors.As(err, &se) || se.ErrorKind() != errkind.Usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a usage error with %q", c.e, err, c.want)
		}
	}
	if w := reg.takeWrites(); len(w) != 0 {
		t.Errorf("refused seeds wrote to the registry: %v", w)
	}
}
