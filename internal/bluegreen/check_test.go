package bluegreen

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"
)

const site = "../../testdata/packages/site/"

func names(ns []Name) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Kind+"="+n.Name)
	}
	return strings.Join(s, ",")
}

// TestSitePackages: the package built by the real zarf that declares SLOT
// keeps every shared name apart per slot; the one with fixed names shares
// its workload cluster, load balancer and registry host between slots.
func TestSitePackages(t *testing.T) {
	p, err := ReadFile(site + "zarf-package-site-slot-amd64-1.0.0.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(p, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Declared || len(res.Same) != 0 {
		t.Fatalf("site-slot: declared %v, same %s", res.Declared, names(res.Same))
	}
	if got, want := names(res.Candidate), "load balancer=airgap-wl-b-lb,registry host=krops-registry-airgap-b,workload cluster=airgap-wl-b"; got != want {
		t.Errorf("site-slot candidate names:\n got %s\nwant %s", got, want)
	}

	p, err = ReadFile(site + "zarf-package-site-fixed-amd64-1.0.0.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	res, err = Check(p, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	if res.Declared {
		t.Error("site-fixed declares SLOT")
	}
	if got, want := names(res.Same), "load balancer=airgap-wl-lb,registry host=krops-registry,workload cluster=airgap-wl"; got != want {
		t.Errorf("site-fixed same names:\n got %s\nwant %s", got, want)
	}
}

// TestSharedNamesSources: container names in actions, oci:// references in
// values, and a name half derived from SLOT.
func TestSharedNamesSources(t *testing.T) {
	p := &Package{
		Variables: []string{"SLOT"},
		Actions:   []string{"docker run -d --name mirror-###ZARF_VAR_SLOT### registry:3", "docker run --name=fixed x"},
		Files: map[string]string{
			"components/a.tar/a/values/v-0.yaml":    "chart:\n  url: oci://charts.local:5000/x\n",
			"components/a.tar/a/manifests/m-0.yaml": "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: wl-###ZARF_VAR_SLOT###\n",
		},
	}
	res, err := Check(p, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(res.Same), "container=fixed,registry host=charts.local"; got != want {
		t.Errorf("same:\n got %s\nwant %s", got, want)
	}
	if got, want := names(res.Candidate), "container=fixed,container=mirror-b,load balancer=wl-b-lb,registry host=charts.local,workload cluster=wl-b"; got != want {
		t.Errorf("candidate:\n got %s\nwant %s", got, want)
	}
}

// TestReadRefuses: not a package, a manifest that is not YAML.
func TestReadRefuses(t *testing.T) {
	if _, err := Read(strings.NewReader("not a tar")); err == nil {
		t.Error("read garbage without error")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "x", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if _, err := Read(&buf); err == nil || !strings.Contains(err.Error(), "no zarf.yaml") {
		t.Errorf("a tar without zarf.yaml: %v", err)
	}
	p := &Package{Files: map[string]string{"components/a.tar/a/manifests/m.yaml": "a: [b"}}
	if _, err := p.SharedNames("a"); err == nil || !strings.Contains(err.Error(), "is not YAML") {
		t.Errorf("bad YAML: %v", err)
	}
}
