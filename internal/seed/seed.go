// Package seed pushes the artifacts a site's workloads pull (Flux config
// artifacts, Helm charts, OCI layouts) from the site's archives into a
// slot's registry, idempotently and checked by digest.
package seed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Entry is one artifact to seed: config.yaml's seed: list.
type Entry struct {
	// Ref is where the artifact goes in the registry, without the host:
	// REPOSITORY:TAG. For a Helm chart it may be a repository prefix
	// alone, as helm push takes it (charts: charts/NAME:VERSION).
	Ref string `yaml:"ref" json:"ref"`
	// Path is an OCI image layout (a directory, or a .tar of one), a Helm
	// chart archive (.tgz), or a directory of configuration pushed as a
	// Flux artifact (what flux push artifact --path pushes). A relative
	// path is relative to the archives directory.
	Path string `yaml:"path" json:"path"`
	// Source and Revision annotate a Flux artifact built from a directory
	// (flux push artifact's --source and --revision); optional.
	Source   string `yaml:"source,omitempty" json:"source,omitempty"`
	Revision string `yaml:"revision,omitempty" json:"revision,omitempty"`
}

// The kinds of source an Entry's Path holds.
const (
	KindOCILayout    = "oci-layout"
	KindHelmChart    = "helm-chart"
	KindFluxArtifact = "flux-artifact"
)

// Result is one artifact seeded: what the slot's record and the history keep.
type Result struct {
	// Ref is REPOSITORY:TAG in the registry.
	Ref  string `json:"ref"`
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Digest is the manifest's digest, read back from the registry.
	Digest    string `json:"digest"`
	MediaType string `json:"mediaType"`
	// Pushed is false when the registry had the digest under Ref already.
	Pushed bool      `json:"pushed"`
	Time   time.Time `json:"time"`
}

// Error is a seed that failed: which entry, and at which step.
type Error struct {
	Entry Entry
	Step  string
	Err   error
	kind  errkind.Kind
}

func (e *Error) Error() string {
	return fmt.Sprintf("seeding %s from %s: %s: %v", e.Entry.Ref, e.Entry.Path, e.Step, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorKind: a source that is missing or not what seed reads is a usage
// error (the config names it); a registry that fails is the environment.
func (e *Error) ErrorKind() errkind.Kind { return e.kind }

// Options tune Push.
type Options struct {
	// PlainHTTP talks HTTP to the registry (a slot's registry on the
	// host's loopback has no TLS).
	PlainHTTP bool
	// Client is the HTTP client (default: one with no credentials).
	Client *http.Client
	// Now stamps results (default time.Now).
	Now func() time.Time
}

// Push seeds host (HOST:PORT) with e, resolving a relative e.Path against
// dir: the source's root manifest is copied with every blob it names
// (blobs the registry has are not sent again) and tagged; when the
// registry has that digest under the tag already, nothing is sent. The
// manifest is then fetched back by tag and its bytes checked against the
// digest.
func Push(ctx context.Context, host, dir string, e Entry, o Options) (*Result, error) {
	path := e.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	src, err := open(ctx, path, e)
	if err != nil {
		return nil, &Error{Entry: e, Step: "reading the source", Err: err, kind: errkind.Usage}
	}
	repo, err := remote.NewRepository(host + "/" + src.repo)
	if err != nil {
		return nil, &Error{Entry: e, Step: "naming the repository", Err: err, kind: errkind.Usage}
	}
	repo.PlainHTTP = o.PlainHTTP
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	repo.Client = &auth.Client{Client: client, Cache: auth.NewCache()}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	res := &Result{Ref: src.repo + ":" + src.tag, Path: e.Path, Kind: src.kind,
		Digest: src.root.Digest.String(), MediaType: src.root.MediaType}
	fail := func(step string, err error) (*Result, error) {
		return nil, &Error{Entry: e, Step: step, Err: err, kind: errkind.Environment}
	}
	have, err := repo.Resolve(ctx, src.tag)
	switch {
	case err == nil && have.Digest == src.root.Digest:
		// Already there: pushing again would change nothing.
	case err != nil && !errors.Is(err, errdef.ErrNotFound):
		return fail("asking the registry for "+res.Ref, err)
	default:
		if err := oras.CopyGraph(ctx, src.store, repo, src.root, oras.DefaultCopyGraphOptions); err != nil {
			return fail("pushing "+res.Ref, err)
		}
		if err := repo.Tag(ctx, src.root, src.tag); err != nil {
			return fail("tagging "+res.Ref, err)
		}
		res.Pushed = true
	}
	if err := check(ctx, repo, src); err != nil {
		return fail("checking "+res.Ref+" after the push", err)
	}
	res.Time = now().UTC()
	return res, nil
}

// check fetches the tag back: the registry must name the source's digest
// and serve bytes that hash to it (content.ReadAll verifies the digest).
func check(ctx context.Context, repo *remote.Repository, src *source) error {
	desc, rc, err := repo.FetchReference(ctx, src.tag)
	if err != nil {
		return err
	}
	defer rc.Close()
	if desc.Digest != src.root.Digest {
		return fmt.Errorf("the registry names %s for tag %s, not the pushed %s", desc.Digest, src.tag, src.root.Digest)
	}
	if _, err := content.ReadAll(rc, src.root); err != nil {
		return fmt.Errorf("the manifest the registry serves is not %s: %w", src.root.Digest, err)
	}
	return nil
}

// source is an opened Entry: its content, root manifest and destination.
type source struct {
	kind      string
	store     content.ReadOnlyStorage
	root      ocispec.Descriptor
	repo, tag string
}

// splitRef splits REPOSITORY[:TAG] (no host, no digest).
func splitRef(ref string) (repo, tag string, err error) {
	if strings.Contains(ref, "@") || strings.Contains(ref, "://") {
		return "", "", fmt.Errorf("ref %q: give REPOSITORY:TAG without a host, scheme or digest", ref)
	}
	repo, tag = ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	// Validate with a placeholder host: the registry's host is the slot's.
	r := registry.Reference{Registry: "localhost", Repository: repo, Reference: tag}
	if err := r.ValidateRepository(); err != nil {
		return "", "", fmt.Errorf("ref %q: %w", ref, err)
	}
	if tag != "" {
		if err := r.ValidateReferenceAsTag(); err != nil {
			return "", "", fmt.Errorf("ref %q: %w", ref, err)
		}
	}
	return repo, tag, nil
}

// open reads path as the kind of source it is.
func open(ctx context.Context, path string, e Entry) (*source, error) {
	repo, tag, err := splitRef(e.Ref)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(path)
	switch {
	case fi.IsDir():
		if _, err := os.Stat(filepath.Join(path, ocispec.ImageLayoutFile)); err == nil {
			return openLayout(ctx, path, repo, tag)
		}
		return buildFlux(ctx, path, repo, tag, e)
	case strings.HasSuffix(lower, ".tgz") || strings.HasSuffix(lower, ".tar.gz"):
		return buildChart(ctx, path, repo, tag)
	case strings.HasSuffix(lower, ".tar"):
		return openLayout(ctx, path, repo, tag)
	}
	return nil, fmt.Errorf("%s is neither a directory, an OCI layout (.tar) nor a Helm chart (.tgz)", path)
}
