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

// Fix is a repair as a value: the commands that repair a damaged part of
// the state, run in order, each only once the one before it exits 0 (a
// gate, then the switch it vouches for); or, when only the operator knows
// which slot serves, one command of OneOf. Why says what it does; it is
// printed as a comment after the line.
type Fix struct {
	Run   []Cmd  `json:"run,omitempty"`
	OneOf []Cmd  `json:"oneOf,omitempty"`
	Why   string `json:"why,omitempty"`
}

// Do is the fix that runs cmds in order, each once the one before exits 0.
func Do(cmds ...Cmd) Fix { return Fix{Run: cmds} }

// OneOf is the fix that runs one of cmds: the one for the slot that
// serves (one command: Do).
func OneOf(cmds ...Cmd) Fix {
	if len(cmds) == 1 {
		return Do(cmds...)
	}
	return Fix{OneOf: cmds}
}

// Because is f with why said after it (after what f said already).
func (f Fix) Because(why string) Fix {
	switch {
	case why == "":
	case f.Why == "":
		f.Why = why
	default:
		f.Why += "; " + why
	}
	return f
}

// WithEnv is f with every plugin and script it runs given the NAME=VALUE
// entry e (the state dir): a pasted repair acts on the state dir that
// printed it.
func (f Fix) WithEnv(e string) Fix {
	withEnv := func(cmds []Cmd) []Cmd {
		out := make([]Cmd, len(cmds))
		for i, c := range cmds {
			out[i] = c
			if len(c.Argv) > 0 && (c.Argv[0] == "kubectl" || strings.HasSuffix(c.Argv[0], ".sh")) {
				out[i] = c.WithEnv(e)
			}
		}
		return out
	}
	return Fix{Run: withEnv(f.Run), OneOf: withEnv(f.OneOf), Why: f.Why}
}

// IsZero says there is nothing to run.
func (f Fix) IsZero() bool { return len(f.Run) == 0 && len(f.OneOf) == 0 }

// Last is the command f runs last (of OneOf: none).
func (f Fix) Last() Cmd {
	if len(f.Run) == 0 {
		return Cmd{}
	}
	return f.Run[len(f.Run)-1]
}

// Is says whether c is `kubectl bundle-PLUGIN ARGS...` with at least args
// as its first arguments.
func (c Cmd) Is(plugin string, args ...string) bool {
	if len(c.Argv) < 2+len(args) || c.Argv[0] != "kubectl" || c.Argv[1] != "bundle-"+plugin {
		return false
	}
	for i, a := range args {
		if c.Argv[2+i] != a {
			return false
		}
	}
	return true
}

// Line is f's commands as one line to paste (no comment).
func (f Fix) Line() string {
	if len(f.OneOf) > 0 {
		lines := make([]string, len(f.OneOf))
		for i, c := range f.OneOf {
			lines[i] = c.String()
		}
		return "run the one for the slot that serves now: " + strings.Join(lines, " | ")
	}
	lines := make([]string, len(f.Run))
	for i, c := range f.Run {
		lines[i] = c.String()
	}
	return strings.Join(lines, " && ")
}

// String is f as an operator reads it: its line, then why as a comment.
func (f Fix) String() string {
	if f.Why == "" {
		return f.Line()
	}
	return f.Line() + "   # " + f.Why
}
