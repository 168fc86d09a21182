package plugins

import (
	"io"
	"path/filepath"

	docs "github.com/urfave/cli-docs/v3"

	kcli "github.com/kubectl-bundle/kubectl-bundle/internal/cli"
)

// Docs returns the generated reference of every plugin: the Markdown page
// under docs/cli/ and the section 1 man page under docs/man/, by path.
func Docs() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range All() {
		cmd := p.Build(kcli.IOStreams{In: nil, Out: io.Discard, ErrOut: io.Discard})
		// The version is the build's; the pages must not change with it.
		cmd.Version = ""
		md, err := docs.ToMarkdown(cmd)
		if err != nil {
			return nil, err
		}
		out[filepath.Join("docs", "cli", p.Name+".md")] = md
		man, err := docs.ToManWithSection(cmd, 1)
		if err != nil {
			return nil, err
		}
		out[filepath.Join("docs", "man", p.Name+".1")] = man
	}
	return out, nil
}
