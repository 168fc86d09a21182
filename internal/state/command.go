package state

import (
	"os"
	"path/filepath"
)

// CommandPrefix is what starts a command printed for this state dir when a
// pasted command would otherwise open another one: the state dir came
// from a relative $KUBECTL_BUNDLE_STATE_DIR (or --state-dir), which names
// another directory wherever the command is pasted. It is that variable
// set to this dir's absolute path, then a space; "" when the command finds
// this dir by itself ($KUBECTL_BUNDLE_STATE_DIR absolute and this dir, or
// unset and this dir the default).
func (d *Dir) CommandPrefix() string {
	if d.CommandEnv() == "" {
		return ""
	}
	return EnvStateDir + "=" + shellQuote(d.Path) + " "
}

// CommandEnv is CommandPrefix as one NAME=VALUE environment entry, for a
// command kept as a value (advice.Cmd.Env); "" when none is needed.
func (d *Dir) CommandEnv() string { return CommandEnvOf(d.Path) }

// CommandEnvOf is CommandEnv for the state dir at the absolute path dir
// (for a library that holds the path of a file in it: the journal's).
func CommandEnvOf(dir string) string {
	env := os.Getenv(EnvStateDir)
	if filepath.IsAbs(env) && filepath.Clean(env) == dir {
		return ""
	}
	if env == "" {
		if def, err := Resolve(""); err == nil && def == dir {
			return ""
		}
	}
	return EnvStateDir + "=" + dir
}
