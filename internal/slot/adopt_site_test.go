package slot_test

import (
	"context"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/seed"
	"github.com/kubectl-bundle/kubectl-bundle/internal/slot"
)

// TestReadSite: adopt reads the site's node and registry images, its
// archives and init package, and what its registry holds, and writes them
// into config.yaml, keeping what the operator wrote there; what it cannot
// determine is named with the text to add.
func TestReadSite(t *testing.T) {
	const operator = "# the site's signer\nverify:\n  certificateIdentity: someone # who signs\nworkloadClusters: [airgap-wl]\n"
	cases := []struct {
		name string
		// containers started on the fake daemon: NAME=IMAGE ("" image: none).
		containers []string
		// init packages put in the archives dir.
		inits []string
		// noArchives: the operator names none.
		noArchives bool
		// registry: what the site's registry holds (REF=flux dir); nil: it does not answer.
		registry []string
		// file is config.yaml before adopt ("": operator's).
		file string
		want map[string]string // key -> status
		// wantValue: key -> substring of the value written
		wantValue map[string]string
		wantAdd   map[string]string // key -> substring of the text to add
		wantNote  map[string]string
	}{
		{name: "the site as offline-run.sh built it",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4@sha256:099e", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst"},
			registry:   []string{"krops:latest", "charts/flux-operator:0.58.0"},
			want: map[string]string{"nodeImage": "written", "registryImage": "written", "archives": "written",
				"initPackageGlob": "written", "seed": "written"},
			wantValue: map[string]string{"nodeImage": "kindest/node:v1.36.4@" + fakes.FakeImageID("kindest/node:v1.36.4"),
				"registryImage": "registry:2@" + fakes.FakeImageID("registry:2"), "initPackageGlob": "zarf-init-arm64.tar.zst"},
		},
		{name: "node container missing",
			containers: []string{"krops-registry-airgap=registry:2"}, inits: []string{"zarf-init-arm64.tar.zst"}, registry: []string{"krops:latest"},
			want:    map[string]string{"nodeImage": "unknown", "registryImage": "written"},
			wantAdd: map[string]string{"nodeImage": "nodeImage: NAME:TAG   # the image airgap-mgmt-control-plane runs: docker inspect --format '{{.Config.Image}}' airgap-mgmt-control-plane"},
		},
		{name: "image empty",
			containers: []string{"airgap-mgmt-control-plane=", "krops-registry-airgap=registry:2"}, inits: []string{"zarf-init-arm64.tar.zst"}, registry: []string{"krops:latest"},
			want:     map[string]string{"nodeImage": "unknown"},
			wantNote: map[string]string{"nodeImage": "names no image by name"},
		},
		{name: "the default glob matches: nothing written",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64-v0.84.0.tar.zst"}, registry: []string{"krops:latest"},
			want: map[string]string{"initPackageGlob": "unchanged"},
		},
		{name: "no matching init package",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			registry:   []string{"krops:latest"},
			want:       map[string]string{"initPackageGlob": "unknown", "archives": "written"},
			wantAdd:    map[string]string{"initPackageGlob": "initPackageGlob: FILE-NAME"},
		},
		{name: "several matching init packages",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst", "zarf-init-amd64.tar.zst"}, registry: []string{"krops:latest"},
			want:     map[string]string{"initPackageGlob": "unknown"},
			wantNote: map[string]string{"initPackageGlob": "2 zarf init packages"},
		},
		{name: "no archives named",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			noArchives: true, registry: []string{"krops:latest"},
			want:    map[string]string{"archives": "unknown", "initPackageGlob": "unknown"},
			wantAdd: map[string]string{"archives": "archives: /ABSOLUTE/PATH/TO/THE/SITE/archives"},
		},
		{name: "registry unreachable",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst"},
			want:       map[string]string{"seed": "unknown", "nodeImage": "written"},
			wantAdd:    map[string]string{"seed": "seed:\n  - ref: krops:latest"},
			wantNote:   map[string]string{"seed": "did not list what it holds"},
		},
		{name: "catalog without krops",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst"}, registry: []string{"charts/podinfo:6.14.0"},
			want:     map[string]string{"seed": "written"},
			wantNote: map[string]string{"seed": "no krops:latest"},
		},
		{name: "empty catalog",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst"}, registry: []string{},
			want:     map[string]string{"seed": "unknown"},
			wantNote: map[string]string{"seed": "holds nothing"},
		},
		{name: "what config.yaml has already is unchanged",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst"}, registry: []string{"krops:latest"},
			file: operator + "nodeImage: kindest/node:v1.36.4@" + fakes.FakeImageID("kindest/node:v1.36.4") + "\n",
			want: map[string]string{"nodeImage": "unchanged", "registryImage": "written"},
		},
		{name: "what the operator wrote is kept",
			containers: []string{"airgap-mgmt-control-plane=kindest/node:v1.36.4", "krops-registry-airgap=registry:2"},
			inits:      []string{"zarf-init-arm64.tar.zst"}, registry: []string{"krops:latest"},
			file:     operator + "nodeImage: my/node:1 # pinned by hand\nseed:\n  - {ref: x:1, path: x}\n",
			want:     map[string]string{"nodeImage": "kept", "seed": "kept", "registryImage": "written"},
			wantNote: map[string]string{"nodeImage": `config.yaml says "my/node:1", which is kept`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newManager(t)
			ctx := context.Background()
			for _, c := range tc.containers {
				name, image, _ := strings.Cut(c, "=")
				args := []string{"run", "-d", "--name", name, image}
				if image == "" {
					args = []string{"run", "-d", "--name", name, "x"}
				}
				if _, err := m.Run.Run(ctx, "docker", args...); err != nil {
					t.Fatal(err)
				}
				if image == "" {
					blankImage(t, name)
				}
			}
			arch := filepath.Join(t.TempDir(), "site", "archives")
			if err := os.MkdirAll(arch, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.inits {
				if err := os.WriteFile(filepath.Join(arch, f), []byte("init"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m.Config.Archives = arch
			if tc.registry != nil {
				host := siteRegistry(t, tc.registry)
				m.RegistryAddr = func(int) string { return host }
			} else {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr := l.Addr().String()
				l.Close()
				m.RegistryAddr = func(int) string { return addr }
			}
			file := m.Dir.Join("config.yaml")
			content := tc.file
			if content == "" {
				content = operator
			}
			if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			so := slot.SiteOptions{Archives: arch, ArchivesFrom: "--archives"}
			if tc.noArchives {
				so = slot.SiteOptions{}
			}
			r, err := m.ReadSite(ctx, m.Config.AdoptDefaults(), so)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]slot.SiteSetting{}
			for _, s := range r.Settings {
				got[s.Key] = s
			}
			for k, want := range tc.want {
				if got[k].Status != want {
					t.Errorf("%s: status %s (%+v), want %s", k, got[k].Status, got[k], want)
				}
			}
			for k, want := range tc.wantValue {
				if v, _ := got[k].Value.(string); v != want {
					t.Errorf("%s: value %q, want %q", k, v, want)
				}
			}
			for k, want := range tc.wantAdd {
				if !strings.Contains(got[k].Add, want) {
					t.Errorf("%s: add %q, want it to contain %q", k, got[k].Add, want)
				}
			}
			for k, want := range tc.wantNote {
				if !strings.Contains(got[k].Note, want) {
					t.Errorf("%s: note %q, want it to contain %q", k, got[k].Note, want)
				}
			}
			// config.yaml: what was written loads, the operator's keys and
			// comments are there still.
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, keep := range []string{"# the site's signer", "certificateIdentity: someone # who signs", "airgap-wl"} {
				if !strings.Contains(string(data), keep) {
					t.Errorf("config.yaml lost %q:\n%s", keep, data)
				}
			}
			cfg, err := slot.LoadConfig(file, func(string) string { return "" }, nil)
			if err != nil {
				t.Fatalf("config.yaml after adopt does not load: %v\n%s", err, data)
			}
			if cfg.Verify.CertificateIdentity != "someone" {
				t.Errorf("verify.certificateIdentity %q after adopt", cfg.Verify.CertificateIdentity)
			}
			for k, s := range got {
				if s.Status != slot.SettingWritten {
					continue
				}
				switch k {
				case "nodeImage":
					if cfg.NodeImage != s.Value {
						t.Errorf("nodeImage in config.yaml %q, read %q", cfg.NodeImage, s.Value)
					}
				case "registryImage":
					if cfg.RegistryImage != s.Value {
						t.Errorf("registryImage in config.yaml %q, read %q", cfg.RegistryImage, s.Value)
					}
				case "archives":
					if cfg.Archives != arch {
						t.Errorf("archives in config.yaml %q, want %q", cfg.Archives, arch)
					}
				case "initPackageGlob":
					mm := *m
					mm.Config = cfg
					if p, err := mm.InitPackage(); err != nil || filepath.Dir(p) != arch {
						t.Errorf("the init package config.yaml names: %q, %v", p, err)
					}
				case "seed":
					if len(cfg.Seed) != len(tc.registry) {
						t.Errorf("seed: %+v, want %d entries", cfg.Seed, len(tc.registry))
					}
					for _, e := range cfg.Seed {
						if _, err := os.Stat(filepath.Join(e.Path, "index.json")); err != nil {
							t.Errorf("seed %s: no OCI layout at %s: %v", e.Ref, e.Path, err)
						}
					}
				}
			}
			if got["nodeImage"].Status == slot.SettingKept && cfg.NodeImage != "my/node:1" {
				t.Errorf("the operator's nodeImage was replaced: %q", cfg.NodeImage)
			}
		})
	}
}

// TestReadSiteSeedsTheSameDigests: what adopt copies from the site's
// registry is pushed, by create's seed, with the digests the site serves.
func TestReadSiteSeedsTheSameDigests(t *testing.T) {
	m, _ := newManager(t)
	site := siteRegistry(t, []string{"krops:latest"})
	m.RegistryAddr = func(int) string { return site }
	if _, err := m.Run.Run(context.Background(), "docker", "run", "-d", "--name", "krops-registry-airgap", "registry:2"); err != nil {
		t.Fatal(err)
	}
	r, err := m.ReadSite(context.Background(), m.Config.AdoptDefaults(), slot.SiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []seed.Entry
	for _, s := range r.Settings {
		if s.Key == "seed" {
			entries, _ = s.Value.([]seed.Entry)
		}
	}
	if len(entries) != 1 {
		t.Fatalf("seed entries %+v", entries)
	}
	other := siteRegistry(t, nil)
	res, err := seed.Push(context.Background(), other, "", entries[0], seed.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := seed.Push(context.Background(), site, "", entries[0], seed.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != want.Digest || want.Pushed {
		t.Errorf("seeded %s, the site serves %s (pushed again to the site: %v)", res.Digest, want.Digest, want.Pushed)
	}
}

// siteRegistry starts a working registry holding refs, each a Flux
// artifact of its own, and returns its host:port.
func siteRegistry(t *testing.T, refs []string) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	for _, ref := range refs {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("# "+ref+"\nresources: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := seed.Push(context.Background(), u.Host, "", seed.Entry{Ref: ref, Path: dir}, seed.Options{PlainHTTP: true}); err != nil {
			t.Fatal(err)
		}
	}
	return u.Host
}

// blankImage makes the fake container name run no named image.
func blankImage(t *testing.T, name string) {
	t.Helper()
	m := &fakes.Machine{Dir: os.Getenv(fakes.EnvDir)}
	if err := m.Edit(func(s *fakes.State) { s.Containers[name].Image = "" }); err != nil {
		t.Fatal(err)
	}
}
