package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// Output formats accepted by -o.
const (
	OutputText = "text"
	OutputJSON = "json"
	// OutputYAML is the command's JSON as YAML; Main converts it, so a
	// command never sees it.
	OutputYAML = "yaml"
)

// ValidateOutput checks the value of -o.
func ValidateOutput(o string) error {
	switch o {
	case OutputText, OutputJSON:
		return nil
	}
	return Usage("unknown output format %q: use -o text, -o json, -o yaml or -o jsonpath=TEMPLATE", o)
}

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// IsTerminal reports whether w is a terminal. Progress bars and colour are
// shown only on terminals.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// UseColor reports whether w should get ANSI colour: a terminal, and
// NO_COLOR unset (https://no-color.org).
func UseColor(w io.Writer) bool {
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return false
	}
	return IsTerminal(w)
}

// Errorf prints "error: ..." to w, the one format every binary uses.
func Errorf(w io.Writer, err error) {
	fmt.Fprintf(w, "error: %v\n", err)
}
