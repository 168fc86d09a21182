package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Digests in zarf's OCI-layout fixture (src/pkg/images/testdata/oras-oci-layout):
// the amd64 manifest of local-test:1.0.0 and hello-world's manifest.
const (
	fixtureManifest = "sha256:6a88822e787d1df28b83ebd72eb348569fc44351b84bba25c0bc566f6083965b"
	otherManifest   = "sha256:03b62250a3cb1abd125271d393fc08bf0cc713391eda6b57c02d1ef85efcc25c"
)

// pinnedLayout writes OUT, a tar of zarf's OCI-layout fixture (DIR, its
// images/ folder) with one image index added over the local-test manifest
// and these names, so that zarf's imageArchives finds each pin:
//
//	docker.io/library/local-test:1.0.0@<manifest>      the manifest (a true pin)
//	docker.io/library/local-test:1.0.0@<hello-world>   the same manifest (a false pin)
//	localhost:9999/local-test:1.0.0@<index>            the index (a true pin)
//	docker.io/library/local-test:1.0.0@<index>         the index (the same tag pinned twice)
//
// It prints the index's digest.
func pinnedLayout(dir, out string) error {
	var idx struct {
		SchemaVersion int              `json:"schemaVersion"`
		MediaType     string           `json:"mediaType,omitempty"`
		Manifests     []map[string]any `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return err
	}
	var manifestSize float64
	for _, m := range idx.Manifests {
		if m["digest"] == fixtureManifest {
			manifestSize, _ = m["size"].(float64)
		}
	}
	if manifestSize == 0 {
		return fmt.Errorf("%s has no manifest %s", dir, fixtureManifest)
	}
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": fixtureManifest, "size": int(manifestSize),
			"platform": map[string]string{"architecture": "amd64", "os": "linux"},
		}},
	})
	sum := sha256.Sum256(index)
	indexDigest := "sha256:" + hex.EncodeToString(sum[:])
	name := func(mediaType, digest string, size int, ref string) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": digest, "size": size,
			"annotations": map[string]string{"org.opencontainers.image.ref.name": ref}}
	}
	const manifestType, indexType = "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json"
	idx.Manifests = append(idx.Manifests,
		name(manifestType, fixtureManifest, int(manifestSize), "docker.io/library/local-test:1.0.0@"+fixtureManifest),
		name(manifestType, fixtureManifest, int(manifestSize), "docker.io/library/local-test:1.0.0@"+otherManifest),
		name(indexType, indexDigest, len(index), "localhost:9999/local-test:1.0.0@"+indexDigest),
		name(indexType, indexDigest, len(index), "docker.io/library/local-test:1.0.0@"+indexDigest),
	)
	newIndex, _ := json.Marshal(idx)

	files := map[string][]byte{"index.json": newIndex, "blobs/sha256/" + indexDigest[len("sha256:"):]: index}
	for _, f := range []string{"oci-layout"} {
		if files[f], err = os.ReadFile(filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return err
	}
	for _, e := range blobs {
		if files["blobs/sha256/"+e.Name()], err = os.ReadFile(filepath.Join(dir, "blobs", "sha256", e.Name())); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		tw.Write(files[n])
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Println(indexDigest)
	return nil
}
