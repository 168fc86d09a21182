package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
)

// ociImage writes a tar of an OCI image layout holding one tiny linux image
// named ref: what `docker save` of a containerd store looks like, so that
// zarf's imageArchives can pull it without a registry.
func ociImage(out, ref, arch string) error {
	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		s := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(s[:])
		blobs[hex.EncodeToString(s[:])] = b
		return d, len(b)
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for name, body := range map[string]string{
		"etc/os-release":  "ID=kubectl-bundle-demo\nVERSION_ID=1.0.0\n",
		"app/message.txt": "hello from the demo image\n",
	} {
		lw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: epoch, Typeflag: tar.TypeReg})
		lw.Write([]byte(body))
	}
	lw.Close()
	layerDigest, layerSize := add(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": arch, "os": "linux",
		"config": map[string]any{"Cmd": []string{"/app/message.txt"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	configDigest, configSize := add(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": configSize},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layerSize}},
	})
	manifestDigest, manifestSize := add(manifest)
	return writeLayout(out, blobs, map[string]any{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifestDigest, "size": manifestSize,
		"platform":    map[string]string{"architecture": arch, "os": "linux"},
		"annotations": map[string]string{"io.containerd.image.name": ref},
	})
}

// writeLayout writes a tar of an OCI image layout: oci-layout, an
// index.json naming the one descriptor top, and every blob, dated at the
// epoch and in digest order, so the same blobs give the same bytes.
func writeLayout(out string, blobs map[string][]byte, top map[string]any) error {
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{top},
	})
	var hexes []string
	for h := range blobs {
		hexes = append(hexes, h)
	}
	sort.Strings(hexes)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	file := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := file("index.json", index); err != nil {
		return err
	}
	for _, h := range hexes {
		if err := file("blobs/sha256/"+h, blobs[h]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}
