package state

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// openRun opens the run lock as a script does (its own descriptor).
func openRun(t *testing.T, d *Dir) *os.File {
	t.Helper()
	p, err := d.RunLockPath()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestRunLock(t *testing.T) {
	t.Setenv(EnvRunFD, "")
	d, err := Open(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := d.RunHolder(); err != nil || h != nil {
		t.Fatalf("no run yet: holder %+v, %v", h, err)
	}
	run := openRun(t, d)
	fd := int(run.Fd())
	if err := d.HoldRun(fd, Holder{PID: 4242, Command: "/x/blue-green.sh apply /p.tar.zst"}); err != nil {
		t.Fatal(err)
	}
	// Another process (another description, no inherited descriptor) sees
	// the live run, named.
	h, err := d.RunHolder()
	if err != nil || h == nil || h.PID != 4242 || h.Command != "/x/blue-green.sh apply /p.tar.zst" {
		t.Fatalf("holder %+v, %v", h, err)
	}
	rl := &RunLockedError{Holder: *h}
	if errkind.Of(rl) != errkind.Conflict || !strings.Contains(rl.Error(), "pid 4242 (/x/blue-green.sh apply /p.tar.zst)") ||
		!strings.Contains(rl.Error(), "which takes the run over: /x/blue-green.sh apply /p.tar.zst") {
		t.Errorf("refusal: %v (kind %v)", rl, errkind.Of(rl))
	}
	// A second run cannot take it.
	other := openRun(t, d)
	var le *RunLockedError
	if err := d.HoldRun(int(other.Fd()), Holder{PID: 1}); !errors.As(err, &le) || le.Holder.PID != 4242 {
		t.Fatalf("second run: %v", err)
	}
	// A plugin call of the run inherits its descriptor: it is part of it.
	t.Setenv(EnvRunFD, strconv.Itoa(fd))
	if h, err := d.RunHolder(); err != nil || h != nil {
		t.Fatalf("the run's own call: holder %+v, %v", h, err)
	}
	// The variable naming a descriptor that is not the run lock proves
	// nothing.
	t.Setenv(EnvRunFD, strconv.Itoa(int(other.Fd())))
	if h, _ := d.RunHolder(); h == nil || h.PID != 4242 {
		t.Fatalf("another description of the lock file: holder %+v", h)
	}
	stray, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	t.Setenv(EnvRunFD, strconv.Itoa(int(stray.Fd())))
	if h, _ := d.RunHolder(); h == nil {
		t.Fatal("a descriptor on another file counted as the run's")
	}
	if err := d.HoldRun(int(stray.Fd()), Holder{PID: 1}); err == nil || errors.As(err, &le) {
		t.Fatalf("holding the run on another file: %v", err)
	}
	// The script dies: the kernel closes its descriptor, the run is over,
	// and the next run takes it at once.
	t.Setenv(EnvRunFD, "")
	run.Close()
	if h, err := d.RunHolder(); err != nil || h != nil {
		t.Fatalf("after the run died: holder %+v, %v", h, err)
	}
	if err := d.HoldRun(int(other.Fd()), Holder{PID: 7, Command: "re-run"}); err != nil {
		t.Fatalf("the re-run: %v", err)
	}
	if h, _ := d.RunHolder(); h == nil || h.PID != 7 {
		t.Fatalf("after the re-run took over: %+v", h)
	}
}

// A run lock that is not a regular file is damage for every probe and
// every run, and RepairRunLock moves it aside without touching what a
// symlink names.
func TestRunLockNotAFile(t *testing.T) {
	t.Setenv(EnvRunFD, "")
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		name, what string
		make       func(p string) error
	}{
		{"directory", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{"symlink", "a symlink (to " + outside + ")", func(p string) error { return os.Symlink(outside, p) }},
		{"dangling symlink", "a symlink (to " + dangling + ")", func(p string) error { return os.Symlink(dangling, p) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(filepath.Join(t.TempDir(), "s"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.MkdirAll("journal"); err != nil {
				t.Fatal(err)
			}
			p := d.Join(RunLockFile)
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				if !d.IsRunLockDamage(err) || errkind.Of(err) != errkind.Environment ||
					!strings.Contains(err.Error(), p+" is damaged: it is "+c.what+", not the regular file") ||
					!strings.HasSuffix(err.Error(), "; repair: "+d.RunLockRepair().String()) {
					t.Errorf("%s: %v (kind %v)", what, err, errkind.Of(err))
				}
			}
			_, err = d.RunConflict()
			check("RunConflict", err)
			_, err = d.RunLockPath()
			check("RunLockPath", err)
			check("HoldRun", d.HoldRun(3, Holder{PID: 1}))
			if b, err := os.ReadFile(outside); err != nil || string(b) != "keep\n" {
				t.Fatalf("the symlink's target was touched: %q, %v", b, err)
			}
			if _, err := os.Lstat(dangling); !os.IsNotExist(err) {
				t.Fatalf("the dangling symlink's target was created: %v", err)
			}
			note, err := d.RepairRunLock()
			if err != nil || !strings.Contains(note, "moved "+RunLockFile+", "+c.what+", aside to "+p+".damaged-") {
				t.Fatalf("repair: %q, %v", note, err)
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != "keep\n" {
				t.Fatalf("the repair touched the symlink's target: %q, %v", b, err)
			}
			if e, err := d.RunConflict(); e != nil || err != nil {
				t.Fatalf("after the repair: %v, %v", e, err)
			}
			if _, err := d.RunLockPath(); err != nil {
				t.Fatalf("after the repair: %v", err)
			}
			if note, err := d.RepairRunLock(); note != "" || err != nil {
				t.Fatalf("repairing a sound run lock: %q, %v", note, err)
			}
		})
	}
}
