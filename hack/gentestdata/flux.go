package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/testpkg"
)

// Media types `flux push artifact` gives an artifact: an OCI manifest with
// Flux's config type and one gzipped tar layer of the directory pushed.
const (
	fluxConfigType  = "application/vnd.cncf.flux.config.v1+json"
	fluxContentType = "application/vnd.cncf.flux.content.v1.tar+gzip"
	// fluxCreated is the artifact's creation time: fixed, so that the
	// artifact, and its digest, are the same on every build.
	fluxCreated = "2026-01-01T00:00:00Z"
)

// fluxArtifact writes a tar of an OCI image layout holding one Flux OCI
// artifact named ref whose layer is the tree under dir, shaped as
// `flux push artifact` makes it: the files in sorted order, owned by
// root, dated at the epoch, gzipped without a name or time, so the same
// tree always gives the same digest. zarf's imageArchives reads it like a
// saved image.
func fluxArtifact(out, ref, dir, source, revision string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		} else if !d.IsDir() {
			return fmt.Errorf("%s is not a regular file or a directory", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	epoch := time.Unix(0, 0)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var layer bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&layer, gzip.BestCompression)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		s := sha256.Sum256(b)
		blobs[hex.EncodeToString(s[:])] = b
		return "sha256:" + hex.EncodeToString(s[:]), len(b)
	}
	diffID := sha256.Sum256(raw.Bytes())
	layerDigest, layerSize := add(layer.Bytes())
	// The config of the empty image flux starts from, with the layer's diff ID.
	config, _ := json.Marshal(map[string]any{
		"architecture": "", "os": "", "created": "0001-01-01T00:00:00Z", "config": map[string]any{},
		"history": []any{map[string]any{"created": "0001-01-01T00:00:00Z"}},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	configDigest, configSize := add(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": fluxConfigType, "digest": configDigest, "size": configSize},
		"layers":        []any{map[string]any{"mediaType": fluxContentType, "digest": layerDigest, "size": layerSize}},
		"annotations": map[string]string{
			"org.opencontainers.image.created":  fluxCreated,
			"org.opencontainers.image.source":   source,
			"org.opencontainers.image.revision": revision,
		},
	})
	manifestDigest, manifestSize := add(manifest)
	err = writeLayout(out, blobs, map[string]any{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifestDigest, "size": manifestSize,
		"annotations": map[string]string{"org.opencontainers.image.ref.name": ref},
	})
	if err != nil {
		return err
	}
	fmt.Println(manifestDigest)
	return nil
}

// fluxLayer finds the content layer of the package's Flux artifact among
// its image blobs.
func fluxLayer(a *testpkg.Archive) (*testpkg.Member, error) {
	for _, m := range a.Members {
		if !strings.HasPrefix(m.Header.Name, "images/blobs/sha256/") || len(m.Data) == 0 || m.Data[0] != '{' {
			continue
		}
		var man struct {
			Config struct {
				MediaType string `json:"mediaType"`
			} `json:"config"`
			Layers []struct {
				MediaType string `json:"mediaType"`
				Digest    string `json:"digest"`
			} `json:"layers"`
		}
		if json.Unmarshal(m.Data, &man) != nil || man.Config.MediaType != fluxConfigType {
			continue
		}
		for _, l := range man.Layers {
			if l.MediaType == fluxContentType {
				if lm := a.Get("images/blobs/sha256/" + strings.TrimPrefix(l.Digest, "sha256:")); lm != nil {
					return lm, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("the package holds no Flux artifact layer")
}
