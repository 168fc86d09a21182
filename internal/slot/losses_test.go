package slot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// TestCatalog: the registry's repositories with their tags, through the
// distribution API of a working in-memory registry; an unreachable one
// is an error (said, not counted).
func TestCatalog(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	for _, p := range []string{"/v2/krops/manifests/latest", "/v2/charts/podinfo/manifests/6.9.0"} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+p, strings.NewReader(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`))
		req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("PUT %s: %v %v", p, err, resp)
		}
		resp.Body.Close()
	}
	m := &Manager{}
	got, err := m.catalog(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "charts/podinfo:6.9.0 krops:latest" {
		t.Errorf("catalog %v", got)
	}
	srv.Close()
	if _, err := m.catalog(context.Background(), srv.URL); err == nil {
		t.Error("a closed registry listed without error")
	}
	l := &Losses{Slot: "b", Claims: []Claim{{"default", "data", "1Gi"}}, Repositories: got}
	if s := l.Summary(); s != "pvc default/data 1Gi, registry charts/podinfo:6.9.0, registry krops:latest" {
		t.Errorf("summary %q", s)
	}
}
