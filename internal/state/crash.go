package state

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvCrashAt names the environment variable that crash tests set to a
// write point's name: the process kills itself with SIGKILL on reaching it.
// Nothing but tests sets it.
const EnvCrashAt = "KUBECTL_BUNDLE_TEST_CRASH_AT"

// crashPointsPassed counts the crash points this process passed, for "#N".
var crashPointsPassed atomic.Int64

// CrashPoint marks a point between two writes. When EnvCrashAt names it
// (or is "#N" and this is the N-th point the process reaches), the process
// dies there as if the power had gone out.
func CrashPoint(name string) {
	v := os.Getenv(EnvCrashAt)
	if v == "" {
		return
	}
	n := crashPointsPassed.Add(1)
	if v == name || (strings.HasPrefix(v, "#") && v[1:] == strconv.FormatInt(n, 10)) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never run on past the point
	}
}
