package stage

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
	"github.com/kubectl-bundle/kubectl-bundle/internal/zarfsplit"
)

// Ref is what a package argument names: a digest, and the file when the
// argument is a path.
type Ref struct {
	// Arg is the argument as given.
	Arg string
	// Digest is the archive's sha256 (for a split package, the joined
	// archive's, as its .part000 records it).
	Digest string
	// File is the path when Arg names a file ("" for a digest).
	File string
	// Bytes is the archive's size when Arg names a file (for a split
	// package, the joined archive's).
	Bytes int64
}

// Identify names the package arg refers to: a sha256 (optionally
// "sha256:"-prefixed) that is not a file's name, the .part000 of a split
// package, or an archive, whose sha256 is computed.
func Identify(arg string) (*Ref, error) {
	d := strings.TrimPrefix(arg, "sha256:")
	if digest.IsSHA256(d) {
		if _, err := os.Stat(arg); err != nil {
			return &Ref{Arg: arg, Digest: d}, nil
		}
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, errkind.New(errkind.Usage, "package %q is neither a sha256 digest nor a readable file: %w", arg, err)
	}
	defer f.Close()
	if strings.HasSuffix(arg, zarfsplit.Suffix) {
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		if err != nil {
			return nil, errkind.New(errkind.Environment, "reading %s: %w", arg, err)
		}
		m, err := zarfsplit.Parse(b)
		if err != nil {
			return nil, errkind.New(errkind.Usage, "package %s: %w", arg, err)
		}
		return &Ref{Arg: arg, Digest: m.Sha256Sum, File: arg, Bytes: m.Bytes}, nil
	}
	sum, err := digest.File(arg)
	if err != nil {
		return nil, errkind.New(errkind.Environment, "%w", err)
	}
	ref := &Ref{Arg: arg, Digest: sum, File: arg}
	if fi, err := f.Stat(); err == nil {
		ref.Bytes = fi.Size()
	}
	return ref, nil
}

// Package is a staged package.
type Package struct {
	Digest string
	// Dir is packages/<digest>/.
	Dir string
	// Path is the staged archive; Sidecar its sha256sum file.
	Path    string
	Sidecar string
	Record  Record
}

// NotStagedError is a package that is not in the state dir.
type NotStagedError struct{ Ref *Ref }

func (e *NotStagedError) Error() string {
	if e.Ref.File == "" {
		return fmt.Sprintf("package %s is not staged (%s verifies and stages it)", e.Ref.Digest, advice.Plugin("verify", "--stage", "PACKAGE"))
	}
	return fmt.Sprintf("package %s (sha256 %s) is not staged: %s verifies and stages it", e.Ref.Arg, e.Ref.Digest, advice.Plugin("verify", "--stage", e.Ref.Arg))
}

// ErrorKind: naming a package that is not there is a usage error.
func (e *NotStagedError) ErrorKind() errkind.Kind { return errkind.Usage }

// IncompleteError is a staged package whose files are missing or damaged.
type IncompleteError struct {
	Digest, Dir, Problem string
	// Restage is the command that stages it again.
	Restage string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("staged package %s is incomplete (%s): stage it again: %s", e.Digest, e.Problem, e.Restage)
}

// ErrorKind: the state dir is damaged.
func (e *IncompleteError) ErrorKind() errkind.Kind { return errkind.Environment }

// ChangedError is a staged copy whose bytes are no longer the ones verified.
type ChangedError struct {
	Digest, Path, Got, Restage string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("the staged copy %s of package %s changed since it was verified (its sha256 is now %s): it is refused; stage it again: %s", e.Path, e.Digest, e.Got, e.Restage)
}

// ErrorKind: the package checked is bad.
func (e *ChangedError) ErrorKind() errkind.Kind { return errkind.Negative }

// Resolve finds the staged package arg names: a staged digest, the path
// of a file whose sha256 is staged, or a split package's .part000.
func Resolve(d *state.Dir, arg string) (*Package, error) {
	ref, err := Identify(arg)
	if err != nil {
		return nil, err
	}
	return Lookup(d, ref)
}

// Lookup finds the staged package of ref.
func Lookup(d *state.Dir, ref *Ref) (*Package, error) {
	dir := d.Join(PackagesDir, ref.Digest)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NotStagedError{Ref: ref}
	}
	if err != nil {
		return nil, errkind.New(errkind.Environment, "reading staged package %s: %w", ref.Digest, err)
	}
	p := &Package{Digest: ref.Digest, Dir: dir}
	incomplete := func(format string, args ...any) error {
		return &IncompleteError{Digest: ref.Digest, Dir: dir, Problem: fmt.Sprintf(format, args...), Restage: p.restageFor(ref)}
	}
	if !fi.IsDir() {
		return nil, incomplete("%s is not a directory", dir)
	}
	data, err := state.ReadFile(filepath.Join(dir, RecordFile), -1, false)
	if err == nil {
		err = json.Unmarshal(data, &p.Record)
	}
	if err != nil {
		return nil, incomplete("%s: %v", RecordFile, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, errkind.New(errkind.Environment, "reading staged package %s: %w", ref.Digest, err)
	}
	var archives []string
	for _, e := range ents {
		if n := e.Name(); n != RecordFile && !strings.HasSuffix(n, ".sha256") {
			archives = append(archives, n)
		} else if strings.HasSuffix(n, ".sha256") {
			p.Sidecar = filepath.Join(dir, n)
		}
	}
	switch {
	case len(archives) == 0:
		return nil, incomplete("the archive is missing from %s", dir)
	case len(archives) > 1:
		return nil, incomplete("%s holds several archives: %s", dir, strings.Join(archives, ", "))
	}
	p.Path = filepath.Join(dir, archives[0])
	if fi, err := os.Stat(p.Path); err != nil || !fi.Mode().IsRegular() {
		return nil, incomplete("%s is not a regular file", p.Path)
	}
	return p, nil
}

// Check re-reads the staged copy and refuses it when its sha256 is no
// longer the digest it was verified under.
func (p *Package) Check() error {
	got, err := digest.File(p.Path)
	if err != nil {
		return errkind.New(errkind.Environment, "checking the staged copy of %s: %w", p.Digest, err)
	}
	if got != p.Digest {
		return &ChangedError{Digest: p.Digest, Path: p.Path, Got: got, Restage: p.Restage()}
	}
	return nil
}

// Restage is the command that verifies and stages the package again, with
// the verification material it was staged with.
func (p *Package) Restage() string { return p.restageFor(nil) }

func (p *Package) restageFor(ref *Ref) string {
	r := &p.Record
	src := r.Source
	if src == "" {
		src = r.Report.Path
	}
	if ref != nil && ref.File != "" {
		src = absPath(ref.File)
	}
	return verifyWith(src, r).String()
}

// verifyWith is verify --stage of src (a placeholder when "") with the
// verification material r was staged with (KEY when it says none).
func verifyWith(src string, r *Record) advice.Cmd {
	if src == "" {
		src = "PACKAGE"
	}
	m := r.Material()
	if m == nil {
		m = []string{"--key", "KEY"}
	}
	return advice.Plugin("verify", append([]string{"--stage", src}, m...)...)
}

// Material are the verification flags r was staged with, as verify and
// the strategy scripts take them (nil when it says none, or r is nil).
func (r *Record) Material() []string {
	switch {
	case r == nil:
		return nil
	case r.Key != "":
		return []string{"--key", r.Key}
	case r.Report.Signer.Method == "keyless" || r.TrustedRoot != "":
		// Without a recorded trusted root it was the embedded one, which
		// verify uses again when --trusted-root is not given.
		var m []string
		if r.TrustedRoot != "" {
			m = append(m, "--trusted-root", r.TrustedRoot)
		}
		return append(m, "--certificate-identity", r.Report.Signer.Identity, "--certificate-oidc-issuer", r.Report.Signer.Issuer)
	case r.IsUnsigned():
		return []string{"--insecure-skip-signature"}
	}
	return nil
}

// VerifyCommand is the command that verifies and stages the package at
// src (a path; "" : PACKAGE) on the site d, with the verification material
// the site staged its newest signed package with (nothing when
// config.yaml's verify: names the signers, keyless: policyKeyless; KEY
// when nothing was staged signed yet), acting on d from anywhere.
func VerifyCommand(d *state.Dir, src string, policyKeyless bool) advice.Cmd {
	if src != "" {
		src = absPath(src)
	}
	if policyKeyless {
		if src == "" {
			src = "PACKAGE"
		}
		return advice.Plugin("verify", "--stage", src).WithEnv(d.CommandEnv())
	}
	return verifyWith(src, newestSigned(d)).WithEnv(d.CommandEnv())
}

// newestSigned is the record of the package staged last with a signature
// checked (nil: none).
func newestSigned(d *state.Dir) *Record {
	ents, _ := os.ReadDir(d.Join(PackagesDir))
	var best *Record
	for _, e := range ents {
		data, err := state.ReadFile(filepath.Join(d.Join(PackagesDir), e.Name(), RecordFile), -1, false)
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(data, &r) != nil || r.IsUnsigned() || (r.Key == "" && r.Report.Signer.Method != "keyless") {
			continue
		}
		if best == nil || r.StagedAt > best.StagedAt {
			best = &r
		}
	}
	return best
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
