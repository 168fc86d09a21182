package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
)

// Common holds the flags every binary of the suite takes.
type Common struct {
	StateDir string
	Output   string
	Quiet    bool
}

// CommonFlags returns the suite's standard flags: --state-dir, -o, -q.
func CommonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state-dir", Usage: "state directory (default $KUBECTL_BUNDLE_STATE_DIR, else $XDG_STATE_HOME/kubectl-bundle, else ~/.local/state/kubectl-bundle)", TakesFile: true},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: OutputText, Usage: "output format: text, json, yaml or jsonpath=TEMPLATE"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress and no text report; the exit code tells the result"},
	}
}

// Log is where progress and notes go: ErrOut, or nowhere with -q.
func (c *Common) Log(streams IOStreams) io.Writer {
	if c.Quiet {
		return nil
	}
	return streams.ErrOut
}

// Root fills in what the five binaries' root commands share: the suite's
// flags first, --version, the streams, and no help subcommand (kubectl
// plugins take --help).
//
// --version has no short form: kubectl's -v is its log verbosity, so a
// plugin that read -v as --version would surprise an operator. urfave's
// own version flag (with -v) is hidden and this one used instead.
func Root(streams IOStreams, c *cli.Command) *cli.Command {
	c.Flags = append(CommonFlags(), c.Flags...)
	c.Flags = append(c.Flags, &cli.BoolFlag{Name: "version", Usage: "print the version", HideDefault: true, Local: true})
	c.HideVersion = true
	c.Reader, c.Writer, c.ErrWriter = streams.In, streams.Out, streams.ErrOut
	c.HideHelpCommand = true
	before := c.Before
	c.Before = func(ctx context.Context, cmd *cli.Command) (context.Context, error) {
		if cmd.Bool("version") {
			fmt.Fprintf(cmd.Root().Writer, "%s version %s\n", cmd.Root().Name, ToolVersion())
			return ctx, errVersionShown
		}
		if before != nil {
			return before(ctx, cmd)
		}
		return ctx, nil
	}
	return c
}

// errVersionShown stops a run after --version printed the version: the
// run succeeded.
var errVersionShown = errors.New("version shown")

// ParseCommon reads and validates the standard flags.
func ParseCommon(cmd *cli.Command) (*Common, error) {
	c := &Common{StateDir: cmd.String("state-dir"), Output: cmd.String("output"), Quiet: cmd.Bool("quiet")}
	if err := ValidateOutput(c.Output); err != nil {
		return nil, err
	}
	return c, nil
}

// RunCommand runs a urfave command with args in os.Args form and turns its
// result into an exit code, printing the error (if any) to ErrOut. It never
// calls os.Exit: that is main's job.
func RunCommand(ctx context.Context, streams IOStreams, cmd *cli.Command, args []string) int {
	cmd.ExitErrHandler = func(context.Context, *cli.Command, error) {}
	cmd.OnUsageError = func(_ context.Context, _ *cli.Command, err error, _ bool) error {
		return errkind.New(errkind.Usage, "%w (see --help)", err)
	}
	err := cmd.Run(ctx, args)
	if err == nil || errors.Is(err, errVersionShown) {
		return ExitOK
	}
	if errkind.Of(err) == errkind.Unknown && isFlagError(err) {
		err = errkind.Wrap(errkind.Usage, err)
	}
	code := ExitCode(err)
	// An empty message is a verdict the command has already reported.
	if err.Error() != "" {
		Errorf(streams.ErrOut, err)
	}
	return code
}

// isFlagError recognises urfave's argument errors that bypass OnUsageError.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"flag provided but not defined", "flag needs an argument", "invalid value", "Required flag", "No help topic"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
