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
}

// Record is verification.json: the report plus who verified and when.
type Record struct {
	Report      any    `json:"report"`
	ToolVersion string `json:"toolVersion"`
	StagedAt    string `json:"stagedAt"`
	// Key is the public key file the signature was checked with, so that
	// a deploy can hand zarf the same key.
	Key string `json:"key,omitempty"`
}

// ValidName checks a package file name before it becomes a path in the state dir.
func ValidName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00\n") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("package file name %q cannot be staged", name)
	}
	return nil
}

// Commit moves the verified copy to packages/<sha256>/<name> beside
// <name>.sha256 and verification.json. When that digest is already staged,
// the existing copy is kept and this one discarded.
func (s *Stager) Commit(sha256, name string, rec Record) (*Result, error) {
	defer s.Abort()
	if err := ValidName(name); err != nil {
		return nil, err
	}
	final := s.dir.Join(PackagesDir, sha256)
	res := &Result{Dir: final, Path: filepath.Join(final, name)}
	if _, err := os.Lstat(final); err == nil {
		res.AlreadyStaged = true
		return res, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checking %s: %w", final, err)
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
	rec.StagedAt = time.Now().UTC().Format(time.RFC3339)
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding verification.json: %w", err)
	}
	state.CrashPoint("stage:before-record")
	if err := state.WriteFile(filepath.Join(s.tmpDir, "verification.json"), append(data, '\n')); err != nil {
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
