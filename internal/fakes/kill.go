package fakes

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// EnvKill names the steps inside which the fakes kill their caller
// (FAKE_KILL): see the package comment.
const EnvKill = "FAKE_KILL"

// killedExit is the status docker and zarf return to say "the step was
// reached and half done: now die"; Docker, Zarf and Runner act on it.
const killedExit = -9

// Steps are the step names FAKE_FAIL and FAKE_KILL take, in the order a
// slot meets them (create: load, image check, cluster, registry, init; deploy; destroy:
// cluster, containers; switch: inspect, network).
var Steps = []string{
	"docker-info", "docker-ps", "docker-stats", "docker-load", "docker-image", "kind-create", "docker-rm", "docker-run",
	"docker-inspect", "docker-port", "zarf-init", "zarf-deploy", "kind-delete", "docker-network", "docker-logs",
}

// kills reports whether FAKE_KILL names step: "STEP" every time it is
// reached, "STEP@N" the N-th time it is reached on this machine (counted
// in $FAKES/reached while FAKE_KILL names it with a count).
func (e env) kills(step string) bool {
	v := e(EnvKill)
	if v == "" {
		return false
	}
	reached := -1
	for _, s := range strings.Split(v, ",") {
		name, nth, counted := strings.Cut(strings.TrimSpace(s), "@")
		if name != step {
			continue
		}
		if !counted {
			return true
		}
		if reached < 0 {
			appendLine(e.dir(), "reached", step)
			reached = 0
			for _, l := range (&Machine{Dir: e.dir()}).lines("reached") {
				if l == step {
					reached++
				}
			}
		}
		if n, err := strconv.Atoi(nth); err == nil && n == reached {
			return true
		}
	}
	return false
}

// killed records in calls that the fake killed its caller inside step
// ("FAKE_KILL STEP", the last line before the caller dies).
func (e env) killed(step string) { e.call("FAKE_KILL " + step) }

// killGroup SIGKILLs this process's group: the fake program, the plugin
// that ran it and the script that ran the plugin die together, as on a
// power cut. It does not return.
func killGroup() {
	_ = syscall.Kill(0, syscall.SIGKILL)
	// Not reached unless the signal could not be sent: never run on.
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// killedError is what an in-process caller (Runner) gets instead of
// dying: the error exec reports for a child killed by SIGKILL.
func killedError(step string) error {
	return fmt.Errorf("signal: killed (FAKE_KILL %s)", step)
}
