package releasefmt

import (
	"strings"
	"testing"
)

const goodManifest = `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: bundle-verify
spec:
  version: v1.2.3
  homepage: https://kubectl-bundle.dev
  shortDescription: verify a Zarf package offline and stage it, in one pass
  description: |
    long text
  platforms:
    - bin: kubectl-bundle-verify
      uri: https://kubectl-bundle.dev/releases/v1.2.3/kubectl-bundle-verify_1.2.3_linux_amd64.tar.gz
      sha256: 185e55e98dd08a3aa97ee92900b8749f260b257fd8a91f833ff8d443e18deec7
      selector:
        matchLabels:
          os: linux
          arch: amd64
`

func TestParseKrewManifestAcceptsGoreleasersOutput(t *testing.T) {
	m, err := ParseKrewManifest([]byte(goodManifest), "bundle-verify")
	if err != nil {
		t.Fatal(err)
	}
	if os, arch := m.Spec.Platforms[0].Platform(); os != "linux" || arch != "amd64" || m.Spec.Version != "v1.2.3" {
		t.Fatalf("parsed %+v", m)
	}
	for _, v := range []string{"v0.0.1-snapshot", "v1.0.0-rc.1+build.5", "v10.20.30"} {
		if _, err := ParseKrewManifest([]byte(strings.Replace(goodManifest, "v1.2.3\n", v+"\n", 1)), "bundle-verify"); err != nil {
			t.Errorf("version %s: %v", v, err)
		}
	}
}

// Every rule krew applies before it installs a manifest, one case each.
func TestParseKrewManifestRejectsWhatKrewRejects(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"api version", "krew.googlecontainertools.github.com/v1alpha2", "krew.googlecontainertools.github.com/v1alpha1", "apiVersion"},
		{"kind", "kind: Plugin", "kind: Plugins", "kind"},
		{"name mismatch", "name: bundle-verify", "name: bundle-gate", "the file's name"},
		{"unsafe name", "name: bundle-verify", "name: ../verify", "not allowed"},
		{"no v", "version: v1.2.3", "version: 1.2.3", "leading v"},
		{"short version", "version: v1.2.3", "version: v1.2", "semantic version"},
		{"leading zero", "version: v1.2.3", "version: v1.02.3", "semantic version"},
		{"no short description", "shortDescription: verify a Zarf package offline and stage it, in one pass", "shortDescription: \"\"", "shortDescription is empty"},
		{"line break", "shortDescription: verify a Zarf package offline and stage it, in one pass", "shortDescription: \"a\\nb\"", "line break"},
		{"no uri", "uri: https://kubectl-bundle.dev/releases/v1.2.3/kubectl-bundle-verify_1.2.3_linux_amd64.tar.gz", "uri: \"\"", "uri is empty"},
		{"bad sha", "185e55e98dd08a3aa97ee92900b8749f260b257fd8a91f833ff8d443e18deec7", "185E55E98DD08A3AA97EE92900B8749F260B257FD8A91F833FF8D443E18DEEC7", "sha256"},
		{"short sha", "185e55e98dd08a3aa97ee92900b8749f260b257fd8a91f833ff8d443e18deec7", "185e55", "sha256"},
		{"no bin", "- bin: kubectl-bundle-verify", "- bin: \"\"", "bin is empty"},
		{"no selector", "      selector:\n        matchLabels:\n          os: linux\n          arch: amd64\n", "", "selector is missing"},
		{"empty match labels", "        matchLabels:\n          os: linux\n          arch: amd64\n", "        matchLabels: {}\n", "matchLabels is given but empty"},
		{"other label", "arch: amd64", "distro: debian", "only on os and arch"},
		{"unknown field", "homepage:", "homepag:", "unknown field"},
		{"empty files", "      selector:", "      files: []\n      selector:", "files is given but empty"},
		{"file without to", "      selector:", "      files:\n        - from: x\n      selector:", "both from and to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(goodManifest, tc.old, tc.new, 1)
			if doc == goodManifest {
				t.Fatalf("the case changes nothing: %q not found", tc.old)
			}
			_, err := ParseKrewManifest([]byte(doc), "bundle-verify")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	m, _ := ParseKrewManifest([]byte(goodManifest), "bundle-verify")
	m.Spec.Platforms = nil
	if err := m.Validate("bundle-verify"); err == nil || !strings.Contains(err.Error(), "platforms is empty") {
		t.Errorf("no platforms: %v", err)
	}
	m.Metadata.Name = "nul"
	if err := m.Validate("nul"); err == nil || !strings.Contains(err.Error(), "Windows") {
		t.Errorf("reserved name: %v", err)
	}
}

func TestKrewName(t *testing.T) {
	if got := KrewName("kubectl-bundle-verify"); got != "bundle-verify" {
		t.Fatal(got)
	}
}

func TestParseSHA256Sums(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	lines, err := ParseSHA256Sums([]byte(sha + "  a.tar.gz\n" + sha + " *b.tar.gz\n\n"))
	if err != nil || len(lines) != 2 || lines[1].Name != "b.tar.gz" || lines[0].SHA256 != sha {
		t.Fatalf("%+v %v", lines, err)
	}
	for name, tc := range map[string]struct{ in, want string }{
		"one space":   {sha + " a", "want"},
		"upper hex":   {strings.ToUpper(sha) + "  a", "want"},
		"path":        {sha + "  dir/a", "plain file name"},
		"dot dot":     {sha + "  ..", "plain file name"},
		"dup":         {sha + "  a\n" + sha + "  a", "already listed on line 1"},
		"empty":       {"\n", "no checksums"},
		"short":       {"abc  a", "want"},
		"no name":     {sha + "  ", "want"},
		"backslash":   {sha + "  a\\b", "plain file name"},
		"carriage rt": {sha + "  a\r", "plain file name"},
	} {
		if _, err := ParseSHA256Sums([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

func FuzzParseKrewManifest(f *testing.F) {
	f.Add([]byte(goodManifest), "bundle-verify")
	f.Add([]byte("apiVersion: x\n"), "a")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		m, err := ParseKrewManifest(b, name)
		if err != nil {
			return
		}
		// Whatever passes must hold krew's invariants.
		if m.Metadata.Name != name || len(m.Spec.Platforms) == 0 || !KrewVersion.MatchString(m.Spec.Version) {
			t.Fatalf("accepted an invalid manifest: %+v", m)
		}
		for _, p := range m.Spec.Platforms {
			if p.Selector == nil || p.Bin == "" || len(p.SHA256) != 64 {
				t.Fatalf("accepted an invalid platform: %+v", p)
			}
		}
	})
}

func FuzzParseSHA256Sums(f *testing.F) {
	sha := strings.Repeat("0f", 32)
	f.Add([]byte(sha + "  a.tar.gz\n" + sha + " *b\n"))
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := ParseSHA256Sums(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if !SHA256Re.MatchString(l.SHA256) || l.Name == "" || strings.ContainsAny(l.Name, "/\\\x00\r\n") || seen[l.Name] {
				t.Fatalf("accepted %+v", l)
			}
			seen[l.Name] = true
		}
	})
}
