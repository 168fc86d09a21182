package state

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// procInfo is what the run lock asks the operating system about other
// processes: Linux answers from /proc (proc_linux.go), darwin from sysctl
// and lsof (proc_darwin.go), both through this interface, so that the
// darwin answers are tested on Linux with fakes (proc_test.go). Nothing here
// needs /proc: a process that cannot read it (a macOS host, a mount
// namespace with an empty /proc) still names the run's holder from the
// record written under the lock (Holder) and checks it for life with
// signal 0; what it loses is only the pid-reuse guard and the list of
// processes that hold the lock after the script died, which then comes
// from the step lock's own record (stepOrphan).
type procInfo interface {
	// start is a token for when pid started: two processes that had the
	// same pid one after the other have different tokens ("" when it
	// cannot be told).
	start(pid int) string
	// command is pid's command line ("" when it cannot be told).
	command(pid int) string
	// openers are the other processes with a descriptor open on p, or,
	// with deleted, on p after p was removed; ok is false when the
	// system cannot say (then nil says nothing).
	openers(p string, deleted bool) (o []Orphan, ok bool)
}

// procs is this system's procInfo; tests replace it.
var procs = newProcInfo()

// alive reports whether h, the holder a lock's record names, still lives:
// signal 0 reaches its pid, and that pid is still the process that wrote
// the record (its start token, when both are known, is the recorded one).
func alive(h *Holder) bool {
	if h == nil || h.PID <= 0 {
		return false
	}
	if err := syscall.Kill(h.PID, 0); err == syscall.ESRCH {
		return false
	}
	if h.Start == "" {
		return true
	}
	now := procs.start(h.PID)
	return now == "" || now == h.Start
}

// ProcStart is pid's start token on this system ("" when it cannot be
// told): lock-run records the script's in the run lock.
func ProcStart(pid int) string { return procs.start(pid) }

// ProcCommand is pid's command line on this system ("" when it cannot be
// told).
func ProcCommand(pid int) string { return procs.command(pid) }

// darwinProcs answers for darwin through the calls it is given: kinfo
// returns a process's start time (kern.proc.pid), procargs its
// kern.procargs2 buffer, lsof runs lsof with the given arguments. The
// darwin build binds them to sysctl and /usr/sbin/lsof; tests bind fakes,
// and lsof for real where it is installed.
type darwinProcs struct {
	kinfo    func(pid int) (sec, usec int64, err error)
	procargs func(pid int) ([]byte, error)
	lsof     func(args ...string) ([]byte, error)
}

func (d darwinProcs) start(pid int) string {
	sec, usec, err := d.kinfo(pid)
	if err != nil || (sec == 0 && usec == 0) {
		return ""
	}
	return strconv.FormatInt(sec, 10) + "." + strconv.FormatInt(usec, 10)
}

func (d darwinProcs) command(pid int) string {
	b, err := d.procargs(pid)
	if err != nil {
		return ""
	}
	return parseProcArgs2(b)
}

// openers asks lsof which processes have p open. A removed file has no
// name to ask by on darwin: deleted is not answered (ok false).
func (d darwinProcs) openers(p string, deleted bool) ([]Orphan, bool) {
	if deleted || d.lsof == nil {
		return nil, false
	}
	out, err := d.lsof("-n", "-P", "-w", "-F", "pc", "--", p)
	if err != nil && len(out) == 0 {
		// lsof exits 1 when nobody has p open, and when it cannot run.
		var ee interface{ ExitCode() int }
		return nil, errors.As(err, &ee) && ee.ExitCode() == 1
	}
	var o []Orphan
	for _, x := range parseLsof(out) {
		if x.PID == os.Getpid() {
			continue
		}
		if c := d.command(x.PID); c != "" {
			x.Command = c
		}
		o = append(o, x)
	}
	return o, true
}

// parseProcArgs2 is the command line in a darwin kern.procargs2 buffer:
// argc (a 32-bit integer, little-endian on every darwin that runs Go), the
// executable's path, NUL padding, then argc NUL-terminated arguments
// (then the environment, which is not read).
func parseProcArgs2(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	argc := int(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	rest := b[4:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return ""
	}
	rest = rest[i:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	var args []string
	for n := 0; n < argc && len(rest) > 0; n++ {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			j = len(rest)
		}
		args = append(args, string(rest[:j]))
		rest = rest[min(j+1, len(rest)):]
	}
	return strings.TrimSpace(strings.Join(args, " "))
}

// parseLsof reads lsof's -F pc output: a "p" line per process, then its
// "c" line (the command name), and "f" lines per descriptor.
func parseLsof(out []byte) []Orphan {
	var o []Orphan
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if l == "" {
			continue
		}
		switch l[0] {
		case 'p':
			if pid, err := strconv.Atoi(l[1:]); err == nil {
				o = append(o, Orphan{PID: pid})
			}
		case 'c':
			if len(o) > 0 && o[len(o)-1].Command == "" {
				o[len(o)-1].Command = l[1:]
			}
		}
	}
	return o
}

// runLsof runs lsof (on PATH, else where macOS keeps it) through the
// suite's runner, bounded: a hung network mount must not hang a refusal.
func runLsof(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := runner.Exec{}.Run(ctx, "lsof", args...)
	if runner.NotFound(err) {
		out, err = runner.Exec{}.Run(ctx, "/usr/sbin/lsof", args...)
	}
	return out, err
}

// noProcs is a system that can tell nothing beyond signal 0.
type noProcs struct{}

func (noProcs) start(int) string                      { return "" }
func (noProcs) command(int) string                    { return "" }
func (noProcs) openers(string, bool) ([]Orphan, bool) { return nil, false }

// linuxProcs answers from a proc filesystem mounted at root (/proc).
type linuxProcs struct{ root string }

func (l linuxProcs) readable() bool {
	_, err := os.Stat(filepath.Join(l.root, "self", "stat"))
	return err == nil
}

// start is the process's start time in clock ticks after boot (field 22
// of stat, counted after the command name, which may hold spaces).
func (l linuxProcs) start(pid int) string {
	b, err := ReadFile(filepath.Join(l.root, strconv.Itoa(pid), "stat"), -1, false)
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state is field 3, starttime field 22.
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func (l linuxProcs) command(pid int) string {
	b, err := ReadFile(filepath.Join(l.root, strconv.Itoa(pid), "cmdline"), -1, false)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// openers scans every process's descriptors: one open on p (the same
// file), or, deleted, one the kernel names "p (deleted)".
func (l linuxProcs) openers(p string, deleted bool) ([]Orphan, bool) {
	if !l.readable() {
		return nil, false
	}
	gone := deletedNames(p)
	match := func(fdPath string) bool {
		link, err := os.Readlink(fdPath)
		return err == nil && gone(link)
	}
	if !deleted {
		want, err := os.Stat(p)
		if err != nil {
			return nil, true
		}
		match = func(fdPath string) bool {
			fi, err := os.Stat(fdPath)
			return err == nil && os.SameFile(fi, want)
		}
	}
	if deleted && !l.mayHoldRemoved(p) {
		return nil, true
	}
	dirs, _ := filepath.Glob(filepath.Join(l.root, "[0-9]*"))
	var out []Orphan
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			if match(filepath.Join(dir, "fd", fd.Name())) {
				out = append(out, Orphan{PID: pid, Command: l.command(pid)})
				break
			}
		}
	}
	return out, true
}

// fdDeleted reports whether this process's descriptor fd is open on p
// after p was removed, as /proc names it; ok is false without /proc.
func (l linuxProcs) fdDeleted(fd int, p string) (deleted, ok bool) {
	link, err := os.Readlink(filepath.Join(l.root, "self", "fd", strconv.Itoa(fd)))
	if err != nil {
		return false, l.readable()
	}
	return deletedNames(p)(link), true
}

// deletedNames is the test of the name the kernel gives a descriptor
// on the run lock p once p is gone from its path: "p (deleted)" by the
// path as it resolves, whatever path p was reached by (a state dir behind
// a symlink is named by its real path, even when p's own directory went
// with it: the nearest ancestor that is left resolves), and by p as
// given; or p moved aside in its directory ("run.lock.old", as journal
// repair moves a damaged one: the run still holds its flock).
func deletedNames(p string) func(link string) bool {
	dirs := map[string]bool{filepath.Dir(p): true, filepath.Dir(resolveExisting(p)): true}
	base := filepath.Base(p)
	return func(link string) bool {
		q, deleted := strings.CutSuffix(link, " (deleted)")
		if !dirs[filepath.Dir(q)] {
			return false
		}
		b := filepath.Base(q)
		return (deleted && b == base) || strings.HasPrefix(b, base+".")
	}
}

// resolveExisting is p with its nearest existing ancestor's symlinks
// resolved (p itself when none resolves).
func resolveExisting(p string) string {
	dir, rest := p, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// mayHoldRemoved reports whether a process may still hold a flock on p
// after p was removed: /proc/locks lists a flock on p's file system whose
// inode is none of the state dir's lock files (the state lock, the step
// lock, a run lock in place). A run holds the run lock with flock, so a
// removed run lock that a run still holds is always listed; when none is,
// the scan of every process's descriptors is skipped (it cost every
// command a walk of /proc, twice), and so it is when the processes that
// took the other flocks hold no descriptor on the removed p
// (mayHoldDeleted). true when /proc/locks cannot be read or parsed.
func (l linuxProcs) mayHoldRemoved(p string) bool {
	b, err := ReadFile(filepath.Join(l.root, "locks"), -1, false)
	if err != nil {
		return true
	}
	var dev uint64
	var named map[uint64]bool
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[1] == "->" {
			f = f[1:]
		}
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			return true
		}
		maj, err1 := strconv.ParseUint(parts[0], 16, 32)
		minor, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return true
		}
		if named == nil {
			// The state dir is p's directory's parent (journal/run.lock).
			stateDir := filepath.Dir(filepath.Dir(p))
			fi, err := os.Stat(stateDir)
			if err != nil {
				return true
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return true
			}
			dev = uint64(st.Dev) //nolint:unconvert // int32 on darwin
			named = map[uint64]bool{}
			for _, name := range []string{"lock", StepLockFile, RunLockFile} {
				if fi, err := os.Stat(filepath.Join(stateDir, name)); err == nil {
					if s, ok := fi.Sys().(*syscall.Stat_t); ok {
						named[uint64(s.Ino)] = true //nolint:unconvert
					}
				}
			}
		}
		if maj == uint64(devMajor(dev)) && minor == uint64(devMinor(dev)) && !named[ino] {
			pid, err := strconv.Atoi(f[4])
			if err != nil || l.mayHoldDeleted(pid, p, ino) {
				return true
			}
		}
	}
	return false
}

// mayHoldDeleted reports whether the flock /proc/locks lists on inode
// ino of p's file system, taken by process pid, may be one on the removed
// p. Only when pid holds a descriptor on that very inode is it known to be
// its own lock on some file, and then it is p's when the descriptor names
// "p (deleted)". Else the taker is not the holder: gone, its pid reused,
// or a child that took the lock for its parent and exited (the scripts'
// journal advance --hold does so for the shell's descriptor 9), so
// anyone may hold it and the caller walks every process. A flock of
// another program on the same file system costs a look at that process's
// descriptors, not a walk of every process's.
func (l linuxProcs) mayHoldDeleted(pid int, p string, ino uint64) bool {
	dir := filepath.Join(l.root, strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, fd := range fds {
		fp := filepath.Join(dir, fd.Name())
		fi, err := os.Stat(fp)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || uint64(st.Ino) != ino { //nolint:unconvert
			continue
		}
		link, err := os.Readlink(fp)
		return err != nil || deletedNames(p)(link)
	}
	return true
}

// devMajor and devMinor split a Linux device number as the kernel's
// /proc/locks prints it.
func devMajor(dev uint64) uint32 { return uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff) }
func devMinor(dev uint64) uint32 { return uint32(dev&0xff) | uint32((dev>>12)&^0xff) }
