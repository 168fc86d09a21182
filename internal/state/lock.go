package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Holder describes the process that holds the state lock or runs a step.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	// Start is when PID started, as this system tells it (ProcStart; ""
	// when it cannot): a record whose PID lives but started at another
	// time names a process that reused the pid, not the holder.
	Start string `json:"start,omitempty"`
	// Step is the transaction step a step lock's holder runs (TXN/PHASE).
	Step string `json:"step,omitempty"`
}

// LockedError says another process holds the state lock.
type LockedError struct {
	Path   string
	Holder *Holder
}

func (e *LockedError) Error() string {
	if e.Holder == nil {
		return fmt.Sprintf("state dir is locked by another kubectl-bundle command (%s); wait for it to finish", e.Path)
	}
	return fmt.Sprintf("state dir is locked by pid %d (%s) since %s; wait for it to finish",
		e.Holder.PID, e.Holder.Command, e.Holder.Since.Format(time.RFC3339))
}

// ErrorKind: another process holding the lock is a conflict.
func (e *LockedError) ErrorKind() errkind.Kind { return errkind.Conflict }

// Lock is a held flock on the state dir's lock file. A process that dies
// releases it with its file descriptors: there is never a stale lock to clean up.
type Lock struct {
	f *os.File
}

// Lock takes the state lock without waiting. It fails at once with a
// *LockedError naming the holder when another process has it.
func (d *Dir) Lock() (*Lock, error) {
	return d.lockFile("lock", "")
}

// StepLockFile is where the process running a transaction's step holds its
// lock (journal/step.lock): the step is owned by a live process, and the
// kernel releases the lock when that process dies.
const StepLockFile = "journal/step.lock"

// LockStep takes the step lock for step (TXN/PHASE) without waiting; a
// *LockedError names the live process that runs a step now.
func (d *Dir) LockStep(step string) (*Lock, error) {
	if _, err := d.MkdirAll("journal"); err != nil {
		return nil, err
	}
	return d.lockFile(StepLockFile, step)
}

// StepRunning returns the holder of the step lock when a live process
// holds it, else nil.
func (d *Dir) StepRunning() (*Holder, error) {
	p := d.Join(StepLockFile)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", p, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		return nil, nil // nobody holds it: closing f releases this probe
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("probing %s: %w", p, err)
	}
	if h := readHolder(p); h != nil {
		return h, nil
	}
	return &Holder{Step: "?"}, nil
}

func (d *Dir) lockFile(name, step string) (*Lock, error) {
	p := d.Join(name)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, FileMode)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", p, err)
	}
	// A holder writes its record right after it takes the lock, so an empty
	// record means it is just starting (or just leaving): look again
	// briefly instead of failing without a name. Bounded: still "at once".
	for try := 0; ; try++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", p, err)
		}
		if h := readHolder(p); h != nil || try == 20 {
			f.Close()
			return nil, &LockedError{Path: p, Holder: h}
		}
		time.Sleep(5 * time.Millisecond)
	}
	h := Holder{PID: os.Getpid(), Command: strings.Join(os.Args, " "), Since: time.Now().UTC(), Start: procs.start(os.Getpid()), Step: step}
	b, _ := json.Marshal(h)
	// The holder record is advisory: the flock is the lock. It is written in
	// place so that a waiter can read it; a torn record only loses the name.
	rec := append(b, '\n')
	if _, err := f.WriteAt(rec, 0); err == nil {
		_ = f.Truncate(int64(len(rec)))
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}

func readHolder(p string) *Holder {
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}
