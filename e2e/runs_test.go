package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kubectl-bundle/kubectl-bundle/internal/demo"
)

// runsDoc is the page that shows what each strategy's runs print, as the
// demo's runs printed it (TestDemoOnRealParts keeps it true).
const runsDoc = "docs/runs.md"

// runBlock is one shown run in runsDoc: <!-- run:NAME --> ```text ... ```
// <!-- /run -->.
var runBlock = regexp.MustCompile("(?s)<!-- run:([a-z0-9-]+) -->\n```text\n(.*?)```\n<!-- /run -->")

// shownScrubber replaces what changes from one demo run to the next in a
// shown run: the demo's directory and the repository (paths become
// relative), the packages' digests (named for their version), transaction
// IDs, times, durations, ports, process IDs and UIDs.
func shownScrubber(t *testing.T, work, root string, pkgs map[string]string) func(string) string {
	t.Helper()
	type rep struct{ re, to string }
	var reps []rep
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(pkgs[n])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		reps = append(reps, rep{"(sha256:)?" + h, "<" + n + "-sha256>"}, rep{h[:12], "<" + n + ">"})
	}
	reps = append(reps,
		// Under KB_E2E_SH the scripts run from a copy (a temporary
		// directory): the printed next commands name it.
		rep{`/\S*kb-e2e-sh-\d+/scripts/`, "scripts/"},
		rep{regexp.QuoteMeta(strings.TrimSuffix(work, "/") + "/"), ""},
		rep{regexp.QuoteMeta(strings.TrimSuffix(work, "/")), "."},
		rep{regexp.QuoteMeta(strings.TrimSuffix(root, "/") + "/"), ""},
		rep{`\b\d{8}-\d{6}-[0-9a-f]{6}\b`, "<ID>"},
		rep{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`, "<time>"},
		rep{`\b\d{8}T\d{6}(\.\d+)?Z`, "<time>"},
		rep{`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`, "<uid>"},
		rep{`\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b`, "<time>"},
		rep{`127\.0\.0\.1:\d+`, "127.0.0.1:PORT"},
		rep{`\bpid \d+`, "pid N"},
		// A duration measured: "(1.234s)", "in 2m3s", "12ms"; not the
		// ones the operator gave ("--gate-timeout 5s", "24h").
		rep{`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|µs|s)\b(\s+left)`, "<duration>$5"},
		rep{`\((\d+h)?(\d+m)?\d+(\.\d+)?(ms|µs|s)\)`, "(<duration>)"},
		rep{`\bin (\d+h)?(\d+m)?\d+(\.\d+)?(ms|µs|s)\b`, "in <duration>"},
	)
	res := make([]*regexp.Regexp, len(reps))
	for i, r := range reps {
		res[i] = regexp.MustCompile(r.re)
	}
	return func(s string) string {
		for i, re := range res {
			s = re.ReplaceAllString(s, reps[i].to)
		}
		return s
	}
}

// checkShown compares each run the demo showed, scrubbed, with its block
// in runsDoc; UPDATE=1 writes the blocks from the runs instead. Every
// block must have been shown and every shown run must have a block.
func checkShown(t *testing.T, shown map[string]demo.ShownRun, scrub func(string) string) {
	t.Helper()
	path := filepath.Join(repo(), runsDoc)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	seen := map[string]bool{}
	var failed []string
	out := runBlock.ReplaceAllStringFunc(doc, func(m string) string {
		sub := runBlock.FindStringSubmatch(m)
		name, have := sub[1], sub[2]
		seen[name] = true
		got, ok := shown[name]
		if !ok {
			failed = append(failed, fmt.Sprintf("%s names run %q, which the demo no longer shows", runsDoc, name))
			return m
		}
		merged := withNewline(scrub(got.Merged))
		if merged != have && !sameRun(have, merged, scrub(got.Stdout), scrub(got.Stderr)) {
			failed = append(failed, fmt.Sprintf("run %q differs from its block in %s (UPDATE=1 rewrites it):\n--- %s\n%s--- the demo's run\n%s", name, runsDoc, runsDoc, have, merged))
			return "<!-- run:" + name + " -->\n```text\n" + merged + "```\n<!-- /run -->"
		}
		return m
	})
	for name := range shown {
		if !seen[name] {
			failed = append(failed, fmt.Sprintf("the demo shows run %q, which %s has no block for: add <!-- run:%s --> ```text ``` <!-- /run --> where it belongs", name, runsDoc, name))
		}
	}
	if os.Getenv("UPDATE") != "" && out != doc {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rewritten from the demo's runs", runsDoc)
		return
	}
	sort.Strings(failed)
	for _, f := range failed {
		t.Error(f)
	}
}

func withNewline(s string) string {
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// sameRun says whether block shows the run whose streams were stdout and
// stderr (merged as they came this time): the same lines, and each
// stream's lines in its own order. Only how the two streams interleave, and
// the width of a column, may differ from the block: they change from one
// run to the next.
func sameRun(block, merged, stdout, stderr string) bool {
	// Columns are as wide as their widest cell, which a placeholder may
	// stand for (a path, a duration): runs of spaces count as one.
	spaces := regexp.MustCompile(` {2,}`)
	lines := func(s string) []string {
		l := strings.Split(strings.TrimRight(s, "\n"), "\n")
		for i := range l {
			l[i] = spaces.ReplaceAllString(l[i], " ")
		}
		return l
	}
	a, b := lines(block), lines(merged)
	if len(a) != len(b) {
		return false
	}
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	if !slices.Equal(sa, sb) {
		return false
	}
	inOrder := func(stream string) bool {
		i := 0
		for _, l := range a {
			if want := lines(stream); i < len(want) && l == want[i] {
				i++
			}
		}
		return stream == "" || i == len(lines(stream))
	}
	return inOrder(stdout) && inOrder(stderr)
}
