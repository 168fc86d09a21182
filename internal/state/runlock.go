package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// RunLockFile is where a strategy script holds the state dir for its whole
// run (journal/run.lock). The script opens it on a descriptor of its own
// and takes the flock on that open file description through a plugin call
// (kubectl-bundle-journal lock-run): the lock then lives exactly as long as
// the script and the children that inherited the descriptor, and the
// kernel releases it when they die, so a killed script's re-run takes the
// run over at once.
const RunLockFile = "journal/run.lock"

// EnvRunFD names the variable a script that holds the run lock exports: the
// number of its descriptor open on RunLockFile. A plugin whose inherited
// descriptor of that number holds the lock is part of that run.
const EnvRunFD = "KUBECTL_BUNDLE_RUN_FD"

// RunLockedError says a live strategy run owns the state dir: every other
// mutating command refuses while it lives, whatever --force says.
type RunLockedError struct {
	Holder Holder
	// Orphans are the processes that still hold the lock when the script
	// that took it (Holder) is gone: the plugin calls it ran, which
	// inherited its descriptor.
	Orphans []Orphan
	// Removed: RunLockFile was removed from outside while Orphans, a live
	// run, still hold the lock on the file they opened.
	Removed bool
	// Replaced says what RunLockFile is now when, removed, it was replaced
	// by what is not a regular file ("" when it was not).
	Replaced string
	// Gone: Holder, the script that took the lock, is dead (signal 0 does
	// not reach its pid, or its pid now names a process that started
	// after it): Orphans, when any is known, hold the lock now.
	Gone bool
	// Path is the run lock's absolute path, named when the processes
	// that hold it cannot be (Gone, no Orphans).
	Path string
}

// unnamed: the script is gone and this system cannot name what still
// holds its lock (no /proc, no lsof, no step running).
func (e *RunLockedError) unnamed() bool { return e.Gone && len(e.Orphans) == 0 }

// findHolders is how to find the unnamed processes that hold the lock.
func (e *RunLockedError) findHolders() string {
	return fmt.Sprintf("this system cannot name them: find them with lsof %s", e.Path)
}

// gone says what happened to RunLockFile under the live run.
func (e *RunLockedError) gone() string {
	if e.Replaced != "" {
		return fmt.Sprintf("was replaced from outside by %s", e.Replaced)
	}
	return "was removed from outside"
}

// Orphan is a process that holds the run lock after its script died.
type Orphan struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
}

// holders names the processes that hold the lock (Orphans) and the kill
// that stops them.
func (e *RunLockedError) holders() (names, kill string) {
	var pids, ns []string
	for _, o := range e.Orphans {
		pids = append(pids, strconv.Itoa(o.PID))
		ns = append(ns, fmt.Sprintf("pid %d (%s)", o.PID, o.Command))
	}
	return strings.Join(ns, ", "), "kill " + strings.Join(pids, " ")
}

// Running is what journal status says of the run: who holds it and what
// to do; "" when nobody is named.
func (e *RunLockedError) Running() string {
	h := e.Holder
	switch names, kill := e.holders(); {
	case len(e.Orphans) > 0 && e.Removed:
		return fmt.Sprintf("%s holds this run (its lock file %s %s): wait for it to finish, or stop it (%s) and re-run the script", names, RunLockFile, e.gone(), kill)
	case len(e.Orphans) > 0:
		return fmt.Sprintf("the run of pid %d is gone, but %s still holds it: wait for it to finish, or stop it (%s) and re-run the script", h.PID, names, kill)
	case e.unnamed():
		return fmt.Sprintf("the run of pid %d (%s) is gone, but a process it started still holds it (%s): wait for it to finish, or stop it and re-run the script", h.PID, h.Command, e.findHolders())
	case h.PID != 0:
		return fmt.Sprintf("pid %d (%s) holds this run since %s: wait for it to finish", h.PID, h.Command, h.Since.Format(time.RFC3339))
	}
	return ""
}

// Waiting names what to wait for: the processes that hold the run ("the
// run" when none is named).
func (e *RunLockedError) Waiting() string {
	var pids []string
	for _, o := range e.Orphans {
		pids = append(pids, strconv.Itoa(o.PID))
	}
	switch {
	case len(pids) == 1:
		return "pid " + pids[0]
	case len(pids) > 1:
		return "pids " + strings.Join(pids, ", ")
	case e.unnamed():
		return "what the run of pid " + strconv.Itoa(e.Holder.PID) + " started"
	case e.Holder.PID != 0:
		return "pid " + strconv.Itoa(e.Holder.PID)
	}
	return "the run"
}

// Stop is what the refusal advises when the run must be stopped: the kill
// and the re-run that takes the run over ("" when nobody is named).
func (e *RunLockedError) Stop() string {
	h := e.Holder
	switch _, kill := e.holders(); {
	case len(e.Orphans) > 0 && e.Removed:
		return fmt.Sprintf("if it hangs, stop it (%s) and re-run the script", kill)
	case len(e.Orphans) > 0:
		return fmt.Sprintf("if it hangs, stop it (%s) and re-run the script, which takes the run over: %s", kill, h.Command)
	case e.unnamed():
		return fmt.Sprintf("if it hangs, stop it (%s) and re-run the script, which takes the run over: %s", e.findHolders(), h.Command)
	case h.PID != 0:
		return fmt.Sprintf("if it hangs, stop it (kill %d) and re-run it, which takes the run over: %s", h.PID, h.Command)
	}
	return ""
}

func (e *RunLockedError) Error() string {
	h := e.Holder
	if len(e.Orphans) > 0 {
		names, kill := e.holders()
		if e.Removed {
			return fmt.Sprintf("the state dir's run lock (%s) %s, but a live run still holds it: %s; every other mutating command refuses while it lives (--force does not override it): wait for it to finish, or stop it (%s) and re-run the script",
				RunLockFile, e.gone(), names, kill)
		}
		return fmt.Sprintf("the strategy run of pid %d (%s) is gone, but what it started still holds the state dir's run lock: %s; wait for it to finish, or stop it (%s) and re-run the script, which takes the run over: %s",
			h.PID, h.Command, names, kill, h.Command)
	}
	if e.unnamed() {
		return fmt.Sprintf("the strategy run of pid %d (%s) is gone, but a process it started still holds the state dir's run lock (%s); wait for it to finish, or stop it and re-run the script, which takes the run over: %s",
			h.PID, h.Command, e.findHolders(), h.Command)
	}
	if h.PID == 0 {
		return fmt.Sprintf("a strategy script holds the state dir (%s) for its run: wait for it to finish (--force does not override a live run)", RunLockFile)
	}
	return fmt.Sprintf("the state dir is held for its whole run by pid %d (%s) since %s: a live strategy run owns the transaction and every other mutating command refuses while it lives (--force does not override it); wait for it to finish; if it hangs, stop it (kill %d) and re-run it, which takes the run over: %s",
		h.PID, h.Command, h.Since.Format(time.RFC3339), h.PID, h.Command)
}

// ErrorKind: a live run owning the state dir is a conflict.
func (e *RunLockedError) ErrorKind() errkind.Kind { return errkind.Conflict }

// RunLockPath creates the journal dir and the run lock and returns its
// path, for a script to open on a descriptor of its own. A run lock that
// is not a regular file is refused (checkRunLock) before anything opens
// it: the script's open would follow a symlink (and create a dangling
// one's target).
func (d *Dir) RunLockPath() (string, error) {
	if _, err := d.MkdirAll("journal"); err != nil {
		return "", err
	}
	p := d.Join(RunLockFile)
	if err := d.checkRunLock(p); err != nil {
		return "", err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, FileMode)
	if err != nil {
		if cerr := d.checkRunLock(p); cerr != nil {
			return "", cerr // replaced in between
		}
		return "", fmt.Errorf("creating %s: %w", p, err)
	}
	defer f.Close()
	if err := d.checkOpenRunLock(f, p); err != nil {
		return "", err
	}
	return p, nil
}

// RunLockRepair is what repairs a run lock that is not a regular file
// (Dir.RepairRunLock).
func (d *Dir) RunLockRepair() advice.Fix {
	return advice.Do(d.Repair()).Because("checks that no live process holds it, then moves it aside")
}

// Repair is `kubectl bundle-journal repair` for this state dir: it repairs
// damage to the journal dir from outside: a transaction.json that does not
// parse (rebuilt from the history), a history that does not parse (its
// readable lines kept, the damaged ones set aside), or a history cut short
// (the loss acknowledged and recorded); and a run lock that is not a
// regular file (RepairRunLock).
func (d *Dir) Repair() advice.Cmd { return d.Plugin("journal", "repair") }

// Plugin is `kubectl bundle-NAME ARGS...` acting on this state dir from
// wherever it is pasted.
func (d *Dir) Plugin(name string, args ...string) advice.Cmd {
	return advice.Plugin(name, args...).WithEnv(d.CommandEnv())
}

// checkRunLock checks what p, the run lock, is without opening it: missing
// or a regular file is fine. Anything else (a directory, a symlink to
// anything, a pipe) was put there from outside and is damage naming the
// repair, unless a live run still holds the lock on the file it replaced
// (a *RunLockedError naming it: that run is waited for first).
func (d *Dir) checkRunLock(p string) error {
	fi, err := os.Lstat(p)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("checking %s: %w", p, err)
	case fi.Mode().IsRegular():
		return nil
	}
	what := nonFile(p, fi)
	if o := runLockHolders(p); len(o) > 0 {
		return &RunLockedError{Orphans: o, Removed: true, Replaced: what}
	}
	return &DamageError{Path: p, Problem: fmt.Sprintf("it is %s, not the regular file a strategy run holds its lock on: something outside kubectl-bundle put it there, and no run can start or be told while it is there", what),
		Fix: d.RunLockRepair()}
}

// checkOpenRunLock checks that f, opened on p without following a
// symlink, is a regular file (p replaced between a check and the open).
func (d *Dir) checkOpenRunLock(f *os.File, p string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("checking %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return d.checkRunLock(p)
	}
	return nil
}

// runLockHolders are the live processes that may hold a run lock that p,
// not a regular file now, replaced: those with a descriptor open on a
// removed run lock, or on what p names (a symlink's target, a directory),
// found through /proc without opening p.
func runLockHolders(p string) []Orphan {
	o := removedLockOpeners(p)
	seen := map[int]bool{}
	for _, x := range o {
		seen[x.PID] = true
	}
	for _, x := range lockOpeners(p) {
		if !seen[x.PID] {
			o = append(o, x)
		}
	}
	return o
}

// nonFile says what p, not a regular file, is.
func nonFile(p string, fi os.FileInfo) string {
	m := fi.Mode()
	switch {
	case m&os.ModeSymlink != 0:
		if to, err := os.Readlink(p); err == nil {
			return fmt.Sprintf("a symlink (to %s)", to)
		}
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("not a regular file (mode %s)", m)
}

// IsRunLockDamage reports whether err is the damage checkRunLock reports
// for this state dir's run lock.
func (d *Dir) IsRunLockDamage(err error) bool {
	var de *DamageError
	return errors.As(err, &de) && de.Path == d.Join(RunLockFile)
}

// RepairRunLock moves the run lock aside when it is not a regular file and
// no live process holds it, and says what it did ("" when the run lock is
// fine or missing). The next run creates a new one. What it moves is never
// opened: a symlink is moved, not its target. The caller holds the state
// lock; a run that still holds the lock it replaced is refused
// (*RunLockedError).
func (d *Dir) RepairRunLock() (string, error) {
	p := d.Join(RunLockFile)
	if err := d.checkRunLock(p); !d.IsRunLockDamage(err) {
		return "", err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", p, err)
	}
	aside, err := MoveAside(p)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("moved %s, %s, aside to %s (no live process holds it); the next strategy run creates a new one", RunLockFile, nonFile(aside, fi), aside), nil
}

// HoldRun takes the run lock on fd, a descriptor the calling script opened
// on RunLockFile and passed down, and records h as its holder. It fails
// with a *RunLockedError naming the holder when another run holds it; a
// descriptor open on another file is refused. fd stays open: the lock
// belongs to the script's open file description, not to this process.
func (d *Dir) HoldRun(fd int, h Holder) error {
	p, err := d.RunLockPath()
	if err != nil {
		return err
	}
	if err := sameFile(fd, p); err != nil {
		if cerr := d.checkRunLock(p); cerr != nil {
			return cerr
		}
		return err
	}
	if err := flockRetry(fd, syscall.LOCK_EX); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return d.runLocked(p)
		}
		return fmt.Errorf("locking %s: %w", p, err)
	}
	if o := removedLockOpeners(p); len(o) > 0 {
		// A run that holds the lock file removed from outside still lives.
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return &RunLockedError{Orphans: o, Removed: true}
	}
	b, _ := json.Marshal(h)
	rec := append(b, '\n')
	// Advisory, as the state lock's: the flock is the lock.
	if _, err := syscall.Pwrite(fd, rec, 0); err == nil {
		_ = syscall.Ftruncate(fd, int64(len(rec)))
	}
	return nil
}

// RunHolder returns the live strategy run that holds the run lock when this
// process is not part of it, else nil. A process is part of a run when its
// EnvRunFD descriptor is open on RunLockFile and holds the lock: the
// script's own plugin calls, and their children, inherit it.
func (d *Dir) RunHolder() (*Holder, error) {
	e, err := d.RunConflict()
	if e == nil {
		return nil, err
	}
	return &e.Holder, nil
}

// RunConflict is RunHolder as the refusal a mutating command gives: nil
// when no run holds the lock or this process is part of it; with the
// processes that still hold it when the script that took it is gone.
func (d *Dir) RunConflict() (*RunLockedError, error) {
	p := d.Join(RunLockFile)
	if own, err := inheritedRun(p); err != nil || own {
		return nil, err
	}
	// Not a regular file: damage (or a run that holds the lock it
	// replaced), said before anything opens it.
	if err := d.checkRunLock(p); err != nil {
		var le *RunLockedError
		if errors.As(err, &le) {
			return le, nil
		}
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if os.IsNotExist(err) {
		// Removed from outside under a live run: the run still holds the
		// lock on the file it opened.
		if o := removedLockOpeners(p); len(o) > 0 {
			return &RunLockedError{Orphans: o, Removed: true}, nil
		}
		return nil, nil
	}
	if err != nil {
		if cerr := d.checkRunLock(p); cerr != nil {
			return nil, cerr // replaced in between
		}
		return nil, fmt.Errorf("opening %s: %w", p, err)
	}
	defer f.Close() // releases this probe
	if err := d.checkOpenRunLock(f, p); err != nil {
		var le *RunLockedError
		if errors.As(err, &le) {
			return le, nil
		}
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		// A fresh run.lock (recreated after it was removed from outside)
		// does not end the run that holds the removed one.
		if o := removedLockOpeners(p); len(o) > 0 {
			return &RunLockedError{Orphans: o, Removed: true}, nil
		}
		return nil, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("probing %s: %w", p, err)
	}
	var le *RunLockedError
	if errors.As(d.runLocked(p), &le) {
		return le, nil
	}
	return &RunLockedError{}, nil
}

func (d *Dir) runLocked(p string) error {
	h := readHolder(p)
	if h == nil {
		return &RunLockedError{}
	}
	e := &RunLockedError{Holder: *h, Path: p}
	if !alive(h) {
		e.Gone = true
		e.Orphans = d.runOrphans(p)
	}
	return e
}

// removedLockOpeners returns the other processes with a descriptor open on
// p after p was removed (Linux names it "p (deleted)"; nil where the
// system cannot say).
func removedLockOpeners(p string) []Orphan {
	o, _ := procs.openers(p, true)
	oldestFirst(o)
	return o
}

// lockOpeners returns the other processes with a descriptor open on p
// (/proc on Linux, lsof on darwin; nil where the system cannot say).
func lockOpeners(p string) []Orphan {
	o, _ := procs.openers(p, false)
	oldestFirst(o)
	return o
}

// runOrphans are the live processes that hold the run lock p after the
// script that took it is gone: those the system names (lockOpeners), and,
// named by its own record wherever the system names none (no /proc), the
// live process that runs the transaction's step: a plugin call of the run,
// which inherited the script's descriptor.
func (d *Dir) runOrphans(p string) []Orphan {
	o := lockOpeners(p)
	if h, err := d.StepRunning(); err == nil && h != nil && h.PID > 0 && h.PID != os.Getpid() && alive(h) {
		for _, x := range o {
			if x.PID == h.PID {
				return o
			}
		}
		o = append(o, Orphan{PID: h.PID, Command: h.Command})
	}
	oldestFirst(o)
	return o
}

// oldestFirst orders the processes that hold a run by when they started,
// the script that took the run first, then the plugin calls it made (a
// directory listing of /proc orders pids as text: 10004 before 9759).
// Processes whose start cannot be told keep to pid order, after the rest.
func oldestFirst(o []Orphan) {
	type key struct {
		known    bool
		sec, sub int64
	}
	keys := make(map[int]key, len(o))
	for _, x := range o {
		t := procs.start(x.PID)
		sec, sub, _ := strings.Cut(t, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		u, err2 := strconv.ParseInt("0"+sub, 10, 64)
		keys[x.PID] = key{known: t != "" && err1 == nil && err2 == nil, sec: s, sub: u}
	}
	sort.SliceStable(o, func(i, j int) bool {
		a, b := keys[o[i].PID], keys[o[j].PID]
		switch {
		case a.known != b.known:
			return a.known
		case a.known && a.sec != b.sec:
			return a.sec < b.sec
		case a.known && a.sub != b.sub:
			return a.sub < b.sub
		}
		return o[i].PID < o[j].PID
	})
}

// onRemovedRunLock reports whether descriptor fd is open on the run lock p
// after p was removed from outside: as /proc names it where there is one;
// elsewhere, a regular file with no name left, on p's file system, that
// holds a run's holder record.
func onRemovedRunLock(fd int, p string) bool {
	if l, ok := procs.(linuxProcs); ok {
		if deleted, ok := l.fdDeleted(fd, p); ok {
			return deleted
		}
	}
	var st, dst syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 0 ||
		syscall.Stat(filepath.Dir(p), &dst) != nil || st.Dev != dst.Dev {
		return false
	}
	b := make([]byte, 4096)
	n, _ := syscall.Pread(fd, b, 0)
	var h Holder
	return n > 0 && json.Unmarshal(bytes.TrimSpace(b[:n]), &h) == nil && h.PID > 0
}

// inheritedRun reports whether this process inherited, through EnvRunFD, a
// descriptor open on the run lock p that holds it. Taking the lock on that
// descriptor again succeeds at once when its description holds it (and
// changes nothing); it would block only if another run held it.
func inheritedRun(p string) (bool, error) {
	v := os.Getenv(EnvRunFD)
	if v == "" {
		return false, nil
	}
	fd, err := strconv.Atoi(v)
	if err == nil && fd >= 3 && sameFile(fd, p) != nil {
		// The run's own descriptor on a run.lock removed from outside
		// still makes this process part of that run.
		if !onRemovedRunLock(fd, p) {
			fd = -1
		}
	}
	if err != nil || fd < 3 {
		// Not a descriptor of a run on this state dir (another state dir's,
		// or a variable left in the environment): probe as anyone would.
		return false, nil
	}
	if err := flockRetry(fd, syscall.LOCK_EX); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("locking %s: %w", p, err)
	}
	return true, nil
}

// flockRetry takes how on fd without waiting, looking again for a moment
// when it is busy: another process's probe holds a shared lock for an
// instant, a run holds it for good.
func flockRetry(fd, how int) error {
	var err error
	for try := 0; try < 40; try++ {
		if err = syscall.Flock(fd, how|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return err
}

// sameFile checks that fd is open on the regular file p (not through a
// symlink: p itself must not be one).
func sameFile(fd int, p string) error {
	var fst, pst syscall.Stat_t
	if err := syscall.Fstat(fd, &fst); err != nil {
		return fmt.Errorf("descriptor %d: %w", fd, err)
	}
	if err := syscall.Lstat(p, &pst); err != nil {
		return fmt.Errorf("checking %s: %w", p, err)
	}
	if pst.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fst.Dev != pst.Dev || fst.Ino != pst.Ino {
		return fmt.Errorf("descriptor %d is not open on %s", fd, p)
	}
	return nil
}

// OwnRun is the holder of the run this process is part of (it inherited
// the run's descriptor, EnvRunFD), nil when it is part of none: when the
// running script's run began, so that a step recorded by an earlier run
// can be told from one of this run.
func (d *Dir) OwnRun() *Holder {
	p := d.Join(RunLockFile)
	if own, err := inheritedRun(p); err != nil || !own {
		return nil
	}
	// Read through the run's own descriptor: a run.lock removed from
	// outside (and perhaps made again by another) is not this run's.
	if fd, err := strconv.Atoi(os.Getenv(EnvRunFD)); err == nil {
		if h := readHolderFD(fd); h != nil {
			return h
		}
	}
	return readHolder(p)
}

// readHolderFD is the holder written on the open run lock fd (nil: none).
func readHolderFD(fd int) *Holder {
	b := make([]byte, 4096)
	n, err := syscall.Pread(fd, b, 0)
	if err != nil || n == 0 {
		return nil
	}
	if i := bytes.IndexByte(b[:n], '\n'); i >= 0 {
		n = i
	}
	var h Holder
	if json.Unmarshal(b[:n], &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}
