// Package stage keeps verified packages in the state dir, content-addressed
// by the archive's sha256, and puts them there only when every check passed.
package stage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// PackagesDir is the state dir's directory of staged packages.
const PackagesDir = "packages"

const stagingPrefix = ".staging-"

// Stager writes one package's copy while it is verified, then commits it
// under packages/<sha256>/ with a single directory rename, or throws it away.
type Stager struct {
	dir     *state.Dir
	tmpDir  string
	archive *os.File
}

// Begin prepares a staging area inside the state dir. The caller must hold
// the state lock; Begin removes what earlier interrupted runs left behind.
func Begin(d *state.Dir) (*Stager, error) {
	pkgs, err := d.MkdirAll(PackagesDir)
	if err != nil {
		return nil, err
	}
	if err := removeLeftovers(pkgs); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(pkgs, stagingPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating staging dir in %s: %w", pkgs, err)
	}
	f, err := os.OpenFile(filepath.Join(tmp, "archive.partial"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, state.FileMode)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("creating staged copy: %w", err)
	}
	return &Stager{dir: d, tmpDir: tmp, archive: f}, nil
}

// removeLeftovers deletes staging dirs of runs that died: nothing in them
// was ever committed.
func removeLeftovers(pkgs string) error {
	entries, err := os.ReadDir(pkgs)
	if err != nil {
		return fmt.Errorf("reading %s: %w", pkgs, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), stagingPrefix) {
			if err := os.RemoveAll(filepath.Join(pkgs, e.Name())); err != nil {
				return fmt.Errorf("removing interrupted staging dir: %w", err)
			}
		}
	}
	return nil
}

// Writer receives the archive's bytes.
func (s *Stager) Writer() io.Writer { return &writebackFile{File: s.archive} }

// writebackFile writes the staged copy behind the verifier: each window of
// new data is sent to the disk at once, and the window before it is waited
// for, so that dirty pages stay bounded and the fsync at commit waits for
// the last window only, not the whole archive.
type writebackFile struct {
	*os.File
	started, waited int64
}

// Abort throws the staging area away.
func (s *Stager) Abort() {
	if s.archive != nil {
		s.archive.Close()
		s.archive = nil
	}
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
		s.tmpDir = ""
	}
}

// Result says where a committed package lies.
type Result struct {
	Dir           string `json:"dir"`
	Path          string `json:"path"`
	AlreadyStaged bool   `json:"alreadyStaged"`
	// Replaced says why a staged copy of the same digest was replaced
	// (it was incomplete or changed); empty when nothing was replaced.
	Replaced string `json:"replaced,omitempty"`
}

// ValidName checks a package file name before it becomes a path in the state dir.
func ValidName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00\n") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("package file name %q cannot be staged", name)
	}
	return nil
}

// Commit moves the verified copy to packages/<sha256>/<name> beside
// <name>.sha256 and verification.json. When that digest is already staged
// and its copy still has that digest, the existing copy is kept (under its
// own name) and this one discarded; a staged copy that is incomplete or
// changed is replaced by this one.
func (s *Stager) Commit(sha256, name string, rec Record) (*Result, error) {
	defer s.Abort()
	if err := ValidName(name); err != nil {
		return nil, err
	}
	// The record's files are found again from any directory.
	rec.Key, rec.TrustedRoot, rec.Source = absPath(rec.Key), absPath(rec.TrustedRoot), absPath(rec.Source)
	final := s.dir.Join(PackagesDir, sha256)
	res := &Result{Dir: final, Path: filepath.Join(final, name)}
	old := ""
	if _, err := os.Lstat(final); err == nil {
		kept, why, err := s.keep(sha256, rec)
		if err != nil {
			return nil, err
		}
		if kept != nil {
			return kept, nil
		}
		// The staged copy is not what was verified: this fresh one replaces it.
		res.Replaced = why
		if old, err = os.MkdirTemp(filepath.Dir(final), stagingPrefix+"replaced-"); err != nil {
			return nil, fmt.Errorf("making room to replace %s: %w", final, err)
		}
		if err := os.Rename(final, filepath.Join(old, "package")); err != nil {
			return nil, fmt.Errorf("moving the damaged staged copy %s aside: %w", final, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checking %s: %w", final, err)
	}
	if old != "" {
		// A crash before the removal leaves a staging dir the next Begin removes.
		defer os.RemoveAll(old)
	}
	state.CrashPoint("stage:before-fsync")
	if err := s.archive.Sync(); err != nil {
		return nil, fmt.Errorf("syncing staged copy: %w", err)
	}
	if err := s.archive.Close(); err != nil {
		return nil, fmt.Errorf("closing staged copy: %w", err)
	}
	s.archive = nil
	state.CrashPoint("stage:before-name")
	if err := os.Rename(filepath.Join(s.tmpDir, "archive.partial"), filepath.Join(s.tmpDir, name)); err != nil {
		return nil, fmt.Errorf("naming staged copy: %w", err)
	}
	// Two spaces: the format sha256sum -c reads.
	sidecar := fmt.Sprintf("%s  %s\n", sha256, name)
	state.CrashPoint("stage:before-sidecar")
	if err := state.WriteFile(filepath.Join(s.tmpDir, name+".sha256"), []byte(sidecar)); err != nil {
		return nil, err
	}
	state.CrashPoint("stage:before-record")
	if err := writeRecord(s.tmpDir, rec); err != nil {
		return nil, err
	}
	if err := os.Chmod(s.tmpDir, state.DirMode); err != nil {
		return nil, fmt.Errorf("setting mode of staging dir: %w", err)
	}
	state.CrashPoint("stage:before-commit")
	if err := os.Rename(s.tmpDir, final); err != nil {
		return nil, fmt.Errorf("committing staged package to %s: %w", final, err)
	}
	s.tmpDir = ""
	state.CrashPoint("stage:after-commit")
	if err := state.SyncDir(filepath.Dir(final)); err != nil {
		return nil, err
	}
	return res, nil
}

// keep checks the package already staged under sha256: complete and
// unchanged, it is kept (its record upgraded when it was unsigned and this
// verification checked a signature) and its Result returned; otherwise
// keep says why it must be replaced.
func (s *Stager) keep(sha256 string, rec Record) (*Result, string, error) {
	p, err := Lookup(s.dir, &Ref{Digest: sha256})
	var ie *IncompleteError
	switch {
	case errors.As(err, &ie):
		return nil, "incomplete: " + ie.Problem, nil
	case err != nil:
		return nil, "", err
	}
	got, err := digest.File(p.Path)
	if err != nil {
		return nil, "", fmt.Errorf("checking the staged copy %s: %w", p.Path, err)
	}
	if got != sha256 {
		return nil, fmt.Sprintf("changed: its sha256 was %s", got), nil
	}
	if p.Record.IsUnsigned() && !rec.IsUnsigned() {
		if err := writeRecord(p.Dir, rec); err != nil {
			return nil, "", err
		}
	}
	return &Result{Dir: p.Dir, Path: p.Path, AlreadyStaged: true}, "", nil
}

func writeRecord(dir string, rec Record) error {
	rec.StagedAt = time.Now().UTC().Format(time.RFC3339)
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", RecordFile, err)
	}
	return state.WriteFile(filepath.Join(dir, RecordFile), append(data, '\n'))
}
