// Package state owns the kubectl-bundle state directory: where it is, who may
// use it, and how files in it are replaced without ever being torn.
package state

import (
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// EnvStateDir names the environment variable that overrides the default state dir.
const EnvStateDir = "KUBECTL_BUNDLE_STATE_DIR"

// DirMode is the permission of the state dir and every dir in it.
const DirMode = 0o700

// FileMode is the permission of every file the suite writes into the state dir.
const FileMode = 0o600

// PermissionError says the state dir may not be used as it is, and how to fix it.
type PermissionError struct {
	Path   string
	Reason string
	Fix    string
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("state dir %s %s; %s", e.Path, e.Reason, e.Fix)
}

// Resolve returns the state dir to use: flag, else $KUBECTL_BUNDLE_STATE_DIR,
// else $XDG_STATE_HOME/kubectl-bundle, else ~/.local/state/kubectl-bundle.
func Resolve(flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv(EnvStateDir)
	}
	if dir == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" {
			dir = filepath.Join(x, "kubectl-bundle")
		}
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the state dir: %w (set --state-dir or %s)", err, EnvStateDir)
		}
		dir = filepath.Join(home, ".local", "state", "kubectl-bundle")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving state dir %q: %w", dir, err)
	}
	return abs, nil
}

// Dir is an opened, checked state directory.
type Dir struct {
	Path string
}

// Open resolves the state dir, creates it 0700 when missing, and refuses one
// that another user owns or that group or others can write.
func Open(flag string) (*Dir, error) {
	p, err := Resolve(flag)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p, DirMode); err != nil {
		return nil, fmt.Errorf("creating state dir %s: %w", p, err)
	}
	if err := CheckDir(p); err != nil {
		return nil, err
	}
	return &Dir{Path: p}, nil
}

// CheckDir enforces the ownership and permission rules on one directory.
func CheckDir(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("checking state dir: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// A symlinked state dir is allowed only when its target passes the same checks.
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("resolving state dir %s: %w", p, err)
		}
		return CheckDir(target)
	}
	if !fi.IsDir() {
		return &PermissionError{Path: p, Reason: "is not a directory", Fix: "point --state-dir at a directory"}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &PermissionError{Path: p, Reason: fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()),
			Fix: "use your own state dir (--state-dir) or run as its owner"}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &PermissionError{Path: p, Reason: fmt.Sprintf("is writable by group or others (mode %04o)", fi.Mode().Perm()),
			Fix: fmt.Sprintf("run: chmod 700 %s", p)}
	}
	return nil
}

// Join returns a path inside the state dir.
func (d *Dir) Join(elem ...string) string {
	return filepath.Join(append([]string{d.Path}, elem...)...)
}

// MkdirAll creates a directory inside the state dir with DirMode.
func (d *Dir) MkdirAll(elem ...string) (string, error) {
	p := d.Join(elem...)
	if err := os.MkdirAll(p, DirMode); err != nil {
		return "", fmt.Errorf("creating %s: %w", p, err)
	}
	return p, nil
}

// ReadPointer reads a small pointer file (active, current, previous) without
// following a symlink: a pointer that is a link is an error, not a redirect.
func ReadPointer(p string) (string, error) {
	b, err := ReadFile(p, 4096, true)
	if err != nil {
		var pe *fs.PathError
		switch {
		case errors.Is(err, syscall.ELOOP):
			return "", fmt.Errorf("pointer %s is a symlink; refusing to follow it", p)
		case errors.As(err, &pe) && pe.Op == "read":
			return "", fmt.Errorf("reading pointer %s: %w", p, err)
		}
		return "", err
	}
	if len(b) > 4096 {
		return "", fmt.Errorf("pointer %s is larger than 4 KiB", p)
	}
	s := strings.TrimRight(string(b), "\r\n")
	return s, nil
}

// DamageError is a state file that cannot be read or validated. It never
// means "none": every mutating command stops on it, and Fix is what
// repairs it (its commands name this state dir when a pasted command
// would otherwise open another).
type DamageError struct {
	Path    string
	Problem string
	Fix     advice.Fix
}

func (e *DamageError) Error() string {
	msg := fmt.Sprintf("%s is damaged: %s", e.Path, e.Problem)
	if !e.Fix.IsZero() {
		msg += "; repair: " + e.Fix.String()
	}
	return msg
}

// ErrorKind: damaged state stops the step.
func (e *DamageError) ErrorKind() errkind.Kind { return errkind.Environment }

// ReadSmall reads a small state file without following a symlink, refusing
// one larger than limit bytes.
func ReadSmall(p string, limit int64) ([]byte, error) {
	b, err := ReadFile(p, limit, true)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("it is a symlink; refusing to follow it")
		}
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("it is larger than %d bytes", limit)
	}
	return b, nil
}
