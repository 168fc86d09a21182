package seed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.yaml.in/yaml/v3"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/content/oci"
)

// Media types of the artifacts the site's workloads pull: Helm's OCI
// charts (helm push) and Flux's configuration artifacts (flux push
// artifact), which source-controller selects by these types.
const (
	HelmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	HelmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	FluxConfigMediaType = "application/vnd.cncf.flux.config.v1+json"
	FluxContentType     = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// epoch is the creation time written into every artifact built here, as
// flux push artifact --reproducible does: the same input gives the same
// digest, so a second seed finds the digest and sends nothing.
var epoch = time.Unix(0, 0).UTC()

// maxChartYAML bounds the Chart.yaml read from a chart archive.
const maxChartYAML = 1 << 20

// openLayout reads an OCI image layout (a directory or a tar of one) and
// picks its manifest: the one tagged tag (its org.opencontainers.image.ref.name),
// else the only one there is.
func openLayout(ctx context.Context, p, repo, tag string) (*source, error) {
	var (
		store *oci.ReadOnlyStore
		fsys  fs.FS
		err   error
	)
	if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
		fsys = os.DirFS(p)
		store, err = oci.NewFromFS(ctx, fsys)
	} else {
		store, err = oci.NewFromTar(ctx, p)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s: %w", p, err)
	}
	idx, err := layoutIndex(p, fsys)
	if err != nil {
		return nil, err
	}
	var tags []string
	var pick *ocispec.Descriptor
	for i, m := range idx.Manifests {
		name := m.Annotations[ocispec.AnnotationRefName]
		if name != "" {
			tags = append(tags, name)
		}
		if tag != "" && (name == tag || strings.HasSuffix(name, ":"+tag)) {
			pick = &idx.Manifests[i]
		}
	}
	if pick == nil && len(idx.Manifests) == 1 {
		pick = &idx.Manifests[0]
	}
	if pick == nil {
		sort.Strings(tags)
		return nil, fmt.Errorf("the OCI layout %s holds %d manifests (tags %s): name one by its tag in ref", p, len(idx.Manifests), strings.Join(tags, ", "))
	}
	if tag == "" {
		name := pick.Annotations[ocispec.AnnotationRefName]
		if name == "" || strings.ContainsAny(name, "/:@") {
			return nil, fmt.Errorf("ref %s names no tag and the layout's manifest has none to take: give REPOSITORY:TAG", repo)
		}
		tag = name
	}
	root := ocispec.Descriptor{MediaType: pick.MediaType, Digest: pick.Digest, Size: pick.Size}
	return &source{kind: KindOCILayout, store: store, root: root, repo: repo, tag: tag}, nil
}

// layoutIndex reads index.json from a layout directory (fsys) or tar (p).
func layoutIndex(p string, fsys fs.FS) (*ocispec.Index, error) {
	var data []byte
	var err error
	if fsys != nil {
		data, err = fs.ReadFile(fsys, ocispec.ImageIndexFile)
	} else {
		data, err = readTarMember(p, ocispec.ImageIndexFile, 16<<20)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w", ocispec.ImageIndexFile, p, err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s of %s: %w", ocispec.ImageIndexFile, p, err)
	}
	if len(idx.Manifests) == 0 {
		return nil, fmt.Errorf("the OCI layout %s holds no manifest", p)
	}
	return &idx, nil
}

// readTarMember reads member name (at most limit bytes) of the plain tar p.
func readTarMember(p, name string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fs.ErrNotExist
		}
		if err != nil {
			return nil, err
		}
		if path.Clean(h.Name) == name {
			return io.ReadAll(io.LimitReader(tr, limit))
		}
	}
}

// chartMeta is what seed needs of a chart's Chart.yaml; the whole file
// becomes the config blob, as helm push writes it.
type chartMeta struct {
	Name    string `yaml:"name"`
	Version string `yaml:"version"`
}

// buildChart makes the OCI artifact helm push makes of a chart archive:
// the archive as the one layer, Chart.yaml as JSON in the config, pushed
// to REPO/NAME:VERSION (ref without a tag) or REPO:VERSION (ref ending in
// the chart's name), the version's '+' spelled '_' as Helm does.
func buildChart(ctx context.Context, p, repo, tag string) (*source, error) {
	archive, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	raw, err := chartYAML(archive)
	if err != nil {
		return nil, fmt.Errorf("%s is not a Helm chart archive: %w", p, err)
	}
	var meta chartMeta
	var all map[string]any
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml of %s: %w", p, err)
	}
	if err := yaml.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("Chart.yaml of %s: %w", p, err)
	}
	if meta.Name == "" || meta.Version == "" {
		return nil, fmt.Errorf("Chart.yaml of %s names no name or version", p)
	}
	version := strings.ReplaceAll(meta.Version, "+", "_")
	switch {
	case tag == "":
		repo, tag = repo+"/"+meta.Name, version
	case path.Base(repo) != meta.Name || tag != version:
		return nil, fmt.Errorf("ref %s:%s does not name chart %s %s: give the repository alone (e.g. charts) and seed pushes charts/%s:%s, as helm push does", repo, tag, meta.Name, meta.Version, meta.Name, version)
	}
	cfg, err := json.Marshal(all)
	if err != nil {
		return nil, fmt.Errorf("Chart.yaml of %s as JSON: %w", p, err)
	}
	store := memory.New()
	layer, err := oras.PushBytes(ctx, store, HelmChartMediaType, archive)
	if err != nil {
		return nil, err
	}
	config, err := oras.PushBytes(ctx, store, HelmConfigMediaType, cfg)
	if err != nil {
		return nil, err
	}
	root, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor: &config,
		Layers:           []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{
			ocispec.AnnotationCreated: epoch.Format(time.RFC3339),
			ocispec.AnnotationTitle:   meta.Name,
			ocispec.AnnotationVersion: meta.Version,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("packing chart %s: %w", p, err)
	}
	return &source{kind: KindHelmChart, store: store, root: root, repo: repo, tag: tag}, nil
}

// chartYAML reads <chart>/Chart.yaml from a chart archive (tar+gzip).
func chartYAML(archive []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no Chart.yaml at its top directory")
		}
		if err != nil {
			return nil, err
		}
		parts := strings.Split(path.Clean(h.Name), "/")
		if len(parts) == 2 && parts[1] == "Chart.yaml" && h.Typeflag == tar.TypeReg {
			return io.ReadAll(io.LimitReader(tr, maxChartYAML))
		}
	}
}

// buildFlux makes the artifact flux push artifact --reproducible makes of
// a directory: its files as one tar+gzip layer (sorted, owner, times and
// modes normalised), an empty config of Flux's type, and the source and
// revision annotations when given.
func buildFlux(ctx context.Context, dir, repo, tag string, e Entry) (*source, error) {
	if tag == "" {
		return nil, fmt.Errorf("ref %s names no tag: give REPOSITORY:TAG (e.g. krops:latest)", repo)
	}
	layerBytes, err := tarDir(dir)
	if err != nil {
		return nil, err
	}
	store := memory.New()
	layer, err := oras.PushBytes(ctx, store, FluxContentType, layerBytes)
	if err != nil {
		return nil, err
	}
	config, err := oras.PushBytes(ctx, store, FluxConfigMediaType, []byte("{}"))
	if err != nil {
		return nil, err
	}
	ann := map[string]string{ocispec.AnnotationCreated: epoch.Format(time.RFC3339)}
	if e.Source != "" {
		ann[ocispec.AnnotationSource] = e.Source
	}
	if e.Revision != "" {
		ann[ocispec.AnnotationRevision] = e.Revision
	}
	root, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor:    &config,
		Layers:              []ocispec.Descriptor{layer},
		ManifestAnnotations: ann,
	})
	if err != nil {
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	return &source{kind: KindFluxArtifact, store: store, root: root, repo: repo, tag: tag}, nil
}

// tarDir is dir's content as a reproducible tar+gzip: the same files give
// the same bytes whoever made them and when. Only directories and regular
// files are taken; anything else is refused, not silently left out.
func tarDir(dir string) ([]byte, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is neither a file nor a directory: a Flux artifact carries files only", p)
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // no name, no time: reproducible
	tw := tar.NewWriter(zw)
	for _, p := range names {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Typeflag: tar.TypeReg}
		if fi.IsDir() {
			h.Name += "/"
			h.Mode, h.Typeflag = 0o755, tar.TypeDir
		} else {
			h.Size = fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if err := copyFile(tw, p); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
