// Package advice holds what the plugins tell an operator to run as typed
// values: a command is a program and its arguments, never a line built
// from strings or parsed back. Rendering a command for a terminal (one
// line of sh words) or for a script (-o json: its argv and that line) is
// done here, in one place.
package advice

import (
	"encoding/json"
	"strings"
)

// Cmd is one command to run: Argv[0] is the program (kubectl, a strategy
// script's absolute path), the rest its arguments, each one word.
type Cmd struct {
	// Env are NAME=VALUE entries the command runs with (the state dir,
	// when a pasted command would otherwise open another one).
	Env  []string
	Argv []string
}

// Plugin is `kubectl bundle-NAME ARGS...`, as an operator runs a plugin.
func Plugin(name string, args ...string) Cmd {
	return Cmd{Argv: append([]string{"kubectl", "bundle-" + name}, args...)}
}

// Program is PATH ARGS... (a strategy script, by its absolute path).
func Program(path string, args ...string) Cmd {
	return Cmd{Argv: append([]string{path}, args...)}
}

// With is c with args appended (c is not changed).
func (c Cmd) With(args ...string) Cmd {
	return Cmd{Env: c.Env, Argv: append(append([]string(nil), c.Argv...), args...)}
}

// WithEnv is c run with the NAME=VALUE entry e too ("" : c as it is).
func (c Cmd) WithEnv(e string) Cmd {
	if e == "" || c.IsZero() {
		return c
	}
	return Cmd{Env: append(append([]string(nil), c.Env...), e), Argv: c.Argv}
}

// IsZero says there is no command.
func (c Cmd) IsZero() bool { return len(c.Argv) == 0 }

// Has says whether flag is one of c's arguments.
func (c Cmd) Has(flag string) bool {
	for _, a := range c.Argv[min(1, len(c.Argv)):] {
		if a == flag {
			return true
		}
	}
	return false
}

// String is c as one line an operator pastes into sh: each word quoted
// only when it needs to be.
func (c Cmd) String() string {
	var w []string
	for _, e := range c.Env {
		name, value, _ := strings.Cut(e, "=")
		w = append(w, name+"="+Word(value))
	}
	for _, a := range c.Argv {
		w = append(w, Word(a))
	}
	return strings.Join(w, " ")
}

type cmdJSON struct {
	Env  []string `json:"env,omitempty"`
	Argv []string `json:"argv"`
	Line string   `json:"line"`
}

// MarshalJSON gives c's argv, for a script to run without a shell, and
// its line, for a person.
func (c Cmd) MarshalJSON() ([]byte, error) {
	argv := c.Argv
	if argv == nil {
		argv = []string{}
	}
	return json.Marshal(cmdJSON{Env: c.Env, Argv: argv, Line: c.String()})
}

// UnmarshalJSON reads what MarshalJSON writes (the argv; the line is
// only its rendering).
func (c *Cmd) UnmarshalJSON(b []byte) error {
	var j cmdJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	c.Env, c.Argv = j.Env, j.Argv
	return nil
}

// Word makes s one sh word when it needs to be: unquoted when it holds
// only characters sh leaves alone, else in single quotes.
func Word(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
