package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"
	"k8s.io/client-go/util/jsonpath"
)

// Main runs the command build returns, with kubectl's -o jsonpath=TEMPLATE
// on top of every command's -o json: scripts read one field without jq
// (`kubectl bundle-switch status -o jsonpath='{.active}'`).
//
// Started as kubectl_complete-<plugin> (make install links that name), it
// answers kubectl's shell completion for the plugin instead.
func Main(ctx context.Context, streams IOStreams, args []string, build func(IOStreams) *cli.Command) int {
	if len(args) > 0 && IsCompletion(args[0]) {
		Complete(streams.Out, build(streams), args[1:])
		return ExitOK
	}
	args, tmpl, found := jsonpathArg(args)
	if !found {
		return RunCommand(ctx, streams, build(streams), args)
	}
	jp := jsonpath.New("output").AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		Errorf(streams.ErrOut, Usage("-o jsonpath=%s: %v", tmpl, err))
		return ExitUsage
	}
	var buf bytes.Buffer
	inner := streams
	inner.Out = &buf
	code := RunCommand(ctx, inner, build(inner), args)
	if buf.Len() == 0 {
		return code
	}
	var v any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		streams.Out.Write(buf.Bytes())
		return code
	}
	if err := jp.Execute(streams.Out, v); err != nil {
		Errorf(streams.ErrOut, fmt.Errorf("-o jsonpath=%s: %w", tmpl, err))
		if code == ExitOK {
			return ExitUsage
		}
		return code
	}
	fmt.Fprintln(streams.Out)
	return code
}

// jsonpathArg finds -o jsonpath=T in its spellings and replaces it with -o json.
func jsonpathArg(args []string) ([]string, string, bool) {
	out := append([]string{}, args...)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		for _, p := range []string{"-o=", "--output=", "-o"} {
			if v, ok := strings.CutPrefix(a, p); ok && strings.HasPrefix(v, "jsonpath=") && a != "-o" {
				out[i] = "-o=json"
				return out, strings.TrimPrefix(v, "jsonpath="), true
			}
		}
		if (a == "-o" || a == "--output") && i+1 < len(out) && strings.HasPrefix(out[i+1], "jsonpath=") {
			t := strings.TrimPrefix(out[i+1], "jsonpath=")
			out[i+1] = "json"
			return out, t, true
		}
	}
	return out, "", false
}
