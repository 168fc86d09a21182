package verify

import (
	"strings"
	"testing"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseChecksums(t *testing.T) {
	good := sha + " components/a.tar\n" + sha + " images/index.json\n"
	lines, err := ParseChecksums([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[1].Path != "images/index.json" || lines[0].SHA256 != sha {
		t.Fatalf("got %+v", lines)
	}
	for name, in := range map[string]string{
		"two spaces":     sha + "  a\n",
		"uppercase hex":  strings.ToUpper(sha) + " a\n",
		"short hash":     sha[:63] + " a\n",
		"no path":        sha + "\n",
		"absolute":       sha + " /etc/passwd\n",
		"dotdot":         sha + " ../a\n",
		"unclean":        sha + " a//b\n",
		"dot prefix":     sha + " ./a\n",
		"duplicate path": sha + " a\n" + sha + " a\n",
		"crlf":           sha + " a\r\n",
		"backslash":      sha + " a\\b\n",
	} {
		if _, err := ParseChecksums([]byte(in)); err == nil {
			t.Errorf("%s: accepted %q", name, in)
		}
	}
	if l, err := ParseChecksums(nil); err != nil || len(l) != 0 {
		t.Errorf("empty checksums.txt: %v %v", l, err)
	}
}

func TestParseZarfYAML(t *testing.T) {
	alpha := `kind: ZarfPackageConfig
metadata:
  name: demo
  version: 1.0.0
  aggregateChecksum: ` + sha + `
build:
  architecture: amd64
  signed: true
  provenanceFiles:
  - zarf.bundle.sig
components:
- name: app
  images:
  - nginx:1.25
  files:
  - source: a
    target: /a
  imageArchives:
  - path: x
    images: [ghcr.io/a/b:1]
`
	p, err := ParseZarfYAML([]byte(alpha))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "demo" || p.Version != "1.0.0" || p.Architecture != "amd64" || p.AggregateChecksum != sha || !*p.Signed || !p.SBOMAble {
		t.Fatalf("got %+v", p)
	}
	if len(p.Images) != 2 || p.Images[0] != "nginx:1.25" || p.FileComponents[0] != "app" {
		t.Fatalf("images/components: %+v", p)
	}
	beta := `apiVersion: zarf.dev/v1alpha1
kind: ZarfPackageConfig
metadata:
  name: demo
  aggregateChecksum: ` + sha + `
build:
  architecture: arm64
components:
- name: app
---
apiVersion: zarf.dev/v1beta1
kind: ZarfPackageConfig
metadata:
  name: demo
build:
  architecture: arm64
  aggregateChecksum: ` + sha + `
components:
- name: app
  images:
  - name: nginx
`
	p, err = ParseZarfYAML([]byte(beta))
	if err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != APIVersionV1Beta1 || p.AggregateChecksum != sha || p.Images[0] != "nginx" {
		t.Fatalf("v1beta1: %+v", p)
	}
	for name, in := range map[string]string{
		"disagree":       strings.Replace(beta, "  aggregateChecksum: "+sha+"\ncomponents", "  aggregateChecksum: "+strings.Repeat("f", 64)+"\ncomponents", 1),
		"bad kind":       "kind: Pod\nmetadata:\n  name: x\n",
		"no name":        "kind: ZarfPackageConfig\n",
		"slash name":     "kind: ZarfPackageConfig\nmetadata:\n  name: a/b\n",
		"unknown api":    "apiVersion: zarf.dev/v9\nkind: ZarfPackageConfig\nmetadata:\n  name: a\n",
		"three docs":     "kind: ZarfPackageConfig\nmetadata: {name: a}\n---\nkind: ZarfPackageConfig\n---\nkind: ZarfPackageConfig\n",
		"bad yaml":       "kind: [\n",
		"too large":      "kind: ZarfPackageConfig\n#" + strings.Repeat("x", MaxZarfYAMLSize),
		"alias bomb":     "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nkind: x\n",
		"bad provenance": "kind: ZarfPackageConfig\nmetadata: {name: a}\nbuild:\n  provenanceFiles: [../x]\n",
	} {
		if _, err := ParseZarfYAML([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckSyftJSON(t *testing.T) {
	good := `{"artifacts":[{"name":"x","nested":{"a":[1,2]}}],"source":{"id":"1"},"descriptor":{"name":"syft"},"schema":{"version":"16.0.0","url":"u"},"files":[]}`
	if err := CheckSyftJSON(strings.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"not object":       `[]`,
		"artifacts object": `{"artifacts":{},"source":{},"descriptor":{},"schema":{"version":"1"}}`,
		"no schema":        `{"artifacts":[],"source":{},"descriptor":{}}`,
		"schema no ver":    `{"artifacts":[],"source":{},"descriptor":{},"schema":{}}`,
		"version number":   `{"artifacts":[],"source":{},"descriptor":{},"schema":{"version":1}}`,
		"truncated":        `{"artifacts":[{"a":`,
		"trailing":         good + `{}`,
		"duplicate key":    `{"artifacts":[],"artifacts":[],"source":{},"descriptor":{},"schema":{"version":"1"}}`,
		"empty":            ``,
	} {
		if err := CheckSyftJSON(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNormalizeImageRef(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                           "docker.io/library/nginx:latest",
		"nginx:1.25":                      "docker.io/library/nginx:1.25",
		"bitnami/redis:7":                 "docker.io/bitnami/redis:7",
		"ghcr.io/stefanprodan/podinfo:6":  "ghcr.io/stefanprodan/podinfo:6",
		"localhost:5000/a":                "localhost:5000/a:latest",
		"127.0.0.1:31999/a/b:2":           "127.0.0.1:31999/a/b:2",
		"nginx@sha256:" + sha:             "docker.io/library/nginx@sha256:" + sha,
		"index.docker.io/library/busybox": "docker.io/library/busybox:latest",
	} {
		if got := NormalizeImageRef(in); got != want {
			t.Errorf("NormalizeImageRef(%q) = %q, want %q", in, got, want)
		}
	}
	if got := sbomFileName("docker.io/library/nginx:1.25"); got != "docker.io_library_nginx_1.25.json" {
		t.Errorf("sbomFileName: %q", got)
	}
}

func TestParseSplitMetadata(t *testing.T) {
	if _, err := ParseSplitMetadata([]byte(`{"Sha256Sum":"` + sha + `","Bytes":10,"Count":2}`)); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{`{}`, `{"Sha256Sum":"x","Bytes":1,"Count":1}`, `{"Sha256Sum":"` + sha + `","Bytes":-1,"Count":1}`,
		`{"Sha256Sum":"` + sha + `","Bytes":1,"Count":0}`, `{"Sha256Sum":"` + sha + `","Bytes":1,"Count":1000}`,
		`{"Sha256Sum":"` + sha + `","Bytes":1,"Count":1,"Extra":1}`, `{"Sha256Sum":"` + sha + `","Bytes":1,"Count":1}{}`} {
		if _, err := ParseSplitMetadata([]byte(in)); err == nil {
			t.Errorf("accepted %s", in)
		}
	}
}

// zarf.yaml's onDeploy actions are kept, each with its component and when
// it runs: what they change, Zarf does not record (issue 28).
func TestParseZarfYAMLDeployActions(t *testing.T) {
	y := `kind: ZarfPackageConfig
metadata: {name: p, version: 1.0.0, architecture: amd64}
components:
- name: caaph
  actions:
    onDeploy:
      before:
      - cmd: ./zarf tools kubectl apply -f caaph.yaml
      after:
      - cmd: |
          kubectl apply -f a.yaml
          kubectl apply -f b.yaml
      - description: no command
      onFailure:
      - cmd: echo failed
    onRemove:
      before:
      - cmd: kubectl delete -f caaph.yaml
- name: plain
`
	p, err := ParseZarfYAML([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range p.DeployActions {
		got = append(got, a.Component+"/"+a.When+"/"+FirstLine(a.Cmd, 40))
	}
	want := "caaph/before/./zarf tools kubectl apply -f caaph.yaml|caaph/after/kubectl apply -f a.yaml ...|caaph/onFailure/echo failed"
	if strings.Join(got, "|") != want {
		t.Errorf("deploy actions:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
}
