package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/urfave/cli/v3"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Main runs the command build returns, with kubectl's -o yaml and
// -o jsonpath=TEMPLATE on top of every command's -o json: scripts read one
// field without jq (`kubectl bundle-switch status -o jsonpath='{.active}'`).
//
// Started as kubectl_complete-<plugin> (make install links that name), it
// answers kubectl's shell completion for the plugin instead.
func Main(ctx context.Context, streams IOStreams, args []string, build func(IOStreams) *cli.Command) int {
	if len(args) > 0 && IsCompletion(args[0]) {
		Complete(streams.Out, build(streams), args[1:])
		return ExitOK
	}
	args, format, tmpl := outputArg(args)
	switch format {
	case OutputYAML:
		return reformat(ctx, streams, args, build, func(b []byte) ([]byte, error) { return yaml.JSONToYAML(b) })
	case outputJSONPath:
	default:
		return RunCommand(ctx, streams, build(streams), args)
	}
	jp := jsonpath.New("output").AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		Errorf(streams.ErrOut, Usage("-o jsonpath=%s: %v", tmpl, err))
		return ExitUsage
	}
	return reformat(ctx, streams, args, build, func(b []byte) ([]byte, error) {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		var out bytes.Buffer
		if err := jp.Execute(&out, v); err != nil {
			return nil, Usage("-o jsonpath=%s: %v", tmpl, err)
		}
		out.WriteString("\n")
		return out.Bytes(), nil
	})
}

// reformat runs the command with -o json and writes its output through
// conv. Output that is not JSON (a text error report) is passed through.
func reformat(ctx context.Context, streams IOStreams, args []string, build func(IOStreams) *cli.Command, conv func([]byte) ([]byte, error)) int {
	var buf bytes.Buffer
	inner := streams
	inner.Out = &buf
	code := RunCommand(ctx, inner, build(inner), args)
	if buf.Len() == 0 {
		return code
	}
	if !json.Valid(buf.Bytes()) {
		streams.Out.Write(buf.Bytes())
		return code
	}
	out, err := conv(buf.Bytes())
	if err != nil {
		Errorf(streams.ErrOut, err)
		if code == ExitOK {
			return ExitUsage
		}
		return code
	}
	streams.Out.Write(out)
	return code
}

// outputJSONPath is -o jsonpath=TEMPLATE, which Main turns into -o json.
const outputJSONPath = "jsonpath"

// outputArg finds -o yaml or -o jsonpath=T in their spellings (-o X,
// -o=X, --output X, --output=X) and replaces the value with json: Main
// converts the command's JSON. It returns the format found ("" when
// neither) and the jsonpath template.
func outputArg(args []string) ([]string, string, string) {
	out := append([]string{}, args...)
	which := func(v string) (string, string, bool) {
		if v == OutputYAML {
			return OutputYAML, "", true
		}
		if t, ok := strings.CutPrefix(v, "jsonpath="); ok {
			return outputJSONPath, t, true
		}
		return "", "", false
	}
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if a == "-o" || a == "--output" {
			if i+1 < len(out) {
				if f, t, ok := which(out[i+1]); ok {
					out[i+1] = OutputJSON
					return out, f, t
				}
			}
			i++
			continue
		}
		for _, p := range []string{"-o=", "--output=", "-o"} {
			if v, ok := strings.CutPrefix(a, p); ok {
				if f, t, ok := which(v); ok {
					out[i] = "-o=json"
					return out, f, t
				}
				break
			}
		}
	}
	return out, "", ""
}
