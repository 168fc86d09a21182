package state

import (
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
)

// WriteFile replaces path atomically: temp file in the same dir, fsync,
// rename, fsync of the dir. A reader sees the old or the new content, never a mix.
func WriteFile(path string, data []byte) error {
	// renameio probes, at every write, whether $TMPDIR can be renamed
	// onto path's file system (two files made, one renamed, two removed)
	// and makes the temporary file there when it can: a write killed half
	// way then leaves nothing beside its target, which the crash tests
	// ask of a staged package's directory (docs/invariant.md).
	// The probe's answer is kept for the process, by directory: a
	// command that writes one directory's files again and again (the
	// in-process model's many) probes it once.
	dir := filepath.Dir(path)
	err := renameio.WriteFile(path, data, FileMode, renameio.WithTempDir(tempDirFor(dir)))
	if err != nil {
		if v, ok := tempDirs.LoadAndDelete(dir); ok && v.(string) != dir {
			// $TMPDIR changed or went away since the probe: probe again.
			err = renameio.WriteFile(path, data, FileMode, renameio.WithTempDir(tempDirFor(dir)))
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// tempDirs holds, by directory, where its atomic writes make their
// temporary files (tempDirFor).
var tempDirs sync.Map

// tempDirFor is where a write into dir makes its temporary file: $TMPDIR
// when a file made there can be renamed into dir (so that a write killed
// half way leaves nothing in dir), else dir itself; renameio's own
// probe, answered once a process for each directory.
func tempDirFor(dir string) string {
	if v, ok := tempDirs.Load(dir); ok {
		return v.(string)
	}
	td := dir
	tmp := os.TempDir()
	if src, err := os.CreateTemp(tmp, ".kb-probe"); err == nil {
		name := src.Name()
		src.Close()
		dest := filepath.Join(dir, filepath.Base(name))
		if os.Rename(name, dest) == nil {
			td = tmp
			os.Remove(dest)
		} else {
			os.Remove(name)
		}
	}
	tempDirs.Store(dir, td)
	return td
}

// SyncDir fsyncs a directory so that a rename or create in it survives a
// crash (plain system calls: no os.File, whose poller setup costs more
// than the sync of a small directory on tmpfs).
func SyncDir(dir string) error {
	var fd int
	var err error
	for {
		if fd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_DIRECTORY, 0); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("opening %s to sync: %w", dir, &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer syscall.Close(fd)
	for {
		if err = syscall.Fsync(fd); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// SetAsideIfNotFile moves p aside (MoveAside) when it is a directory or
// anything else that is neither a regular file nor a symlink, so that an
// atomic rename can replace it; it returns where it went ("" when p was
// left alone). Nothing is deleted: the damaged entry is kept to inspect.
func SetAsideIfNotFile(p string) (string, error) {
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0 {
		return "", nil
	}
	return MoveAside(p)
}

// AsideName is a name beside p that nothing holds yet, for a damaged p
// to be kept under: p.damaged-<UTC time>, with -2, -3, ... after it when
// an earlier entry of the same instant is there (two repairs within one
// clock tick must not collide).
func AsideName(p string) string {
	base := p + ".damaged-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	name := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// MoveAside renames p, whatever it is (a file, a directory, a symlink:
// the link itself), to AsideName(p) and syncs its directory; it returns
// the new name. Nothing is deleted: the damaged entry is kept to inspect.
func MoveAside(p string) (string, error) {
	aside := AsideName(p)
	if err := os.Rename(p, aside); err != nil {
		return "", fmt.Errorf("moving the damaged %s aside: %w", p, err)
	}
	return aside, SyncDir(filepath.Dir(p))
}

// Remove is the command that removes the damaged entry p, whatever it is
// (rm -r for a directory).
func Remove(p string) advice.Cmd {
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return advice.Program("rm", "-r", p)
	}
	return advice.Program("rm", p)
}

func shellQuote(s string) string {
	for _, r := range s {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' || r == ',' || r == '=' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
