package kubectlbundle_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestGuardTableIsOneTable: the table of the guard and the exit codes is
// written once, in docs/strategies.md; the README links it instead of
// keeping a copy that could drift.
func TestGuardTableIsOneTable(t *testing.T) {
	read := func(file string) string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	s := read("docs/strategies.md")
	i, j := strings.Index(s, "<!-- guard-table"), strings.Index(s, "<!-- /guard-table -->")
	if i < 0 || j < i {
		t.Fatal("docs/strategies.md has no guard table (<!-- guard-table ... <!-- /guard-table -->)")
	}
	docs := s[i:j]
	for _, want := range []string{"| in-place | DEPLOYING, RESTORING |", "| recreate | TEARDOWN |", "| blue-green | accept (RETIRED) |", "2, in kubectl's form: `error: "} {
		if !strings.Contains(docs, want) {
			t.Errorf("the guard table lacks %q", want)
		}
	}
	for _, file := range docPages(t) {
		if file == "docs/strategies.md" {
			continue
		}
		if s := read(file); strings.Contains(s, "<!-- guard-table") || strings.Contains(s, "| in-place | DEPLOYING, RESTORING |") {
			t.Errorf("%s copies the guard table: link docs/strategies.md#the-guard-and-the-exit-codes instead", file)
		}
	}
	if !strings.Contains(read("README.md"), "(docs/strategies.md#the-guard-and-the-exit-codes)") {
		t.Error("README.md does not link the guard table (docs/strategies.md#the-guard-and-the-exit-codes)")
	}
}

// maxParagraphWords bounds a paragraph of the README: an operator reads it
// in a hurry, and what needs more words is a list, a table or a page of
// docs/.
const maxParagraphWords = 120

// paragraphs returns the paragraphs of the markdown doc outside fenced
// code blocks, tables, headings and HTML comments, with the line each
// starts on. A list item is a paragraph of its own.
func paragraphs(doc string) (starts []int, texts []string) {
	var cur []string
	start, fence := 0, ""
	flush := func() {
		if len(cur) > 0 {
			starts, texts = append(starts, start), append(texts, strings.Join(cur, " "))
		}
		cur = nil
	}
	item := regexp.MustCompile(`^\s*([-*+]|\d+[.)])\s`)
	for i, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(t, "```"), strings.HasPrefix(t, "~~~"):
			flush()
			fence = t[:3]
			continue
		case t == "", strings.HasPrefix(t, "#"), strings.HasPrefix(t, "|"), strings.HasPrefix(t, "<!--"):
			flush()
			continue
		case item.MatchString(line):
			flush()
			t = strings.TrimSpace(item.ReplaceAllString(line, ""))
		}
		if len(cur) == 0 {
			start = i + 1
		}
		cur = append(cur, t)
	}
	flush()
	return starts, texts
}

// TestReadmeParagraphsAreShort: no paragraph of README.md (outside code
// blocks and tables) runs over maxParagraphWords words.
func TestReadmeParagraphsAreShort(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	starts, texts := paragraphs(string(b))
	if len(texts) == 0 {
		t.Fatal("README.md has no paragraph")
	}
	for i, p := range texts {
		if n := len(strings.Fields(p)); n > maxParagraphWords {
			words := strings.Fields(p)[:8]
			t.Errorf("README.md:%d: a paragraph of %d words (at most %d: split it, or make it a list or a table): %s ...", starts[i], n, maxParagraphWords, strings.Join(words, " "))
		}
	}
}

// TestParagraphs: what the README check counts as a paragraph.
func TestParagraphs(t *testing.T) {
	doc := "# T\n\none two\nthree\n\n```sh\nnot counted\n```\n- a b\n  c\n- d\n1. e\n\n| x | y |\n|---|---|\n<!-- z -->\nf\n"
	starts, texts := paragraphs(doc)
	want := []string{"one two three", "a b c", "d", "e", "f"}
	if strings.Join(texts, "/") != strings.Join(want, "/") {
		t.Errorf("paragraphs = %q, want %q", texts, want)
	}
	if len(starts) != len(want) || starts[0] != 3 || starts[1] != 9 || starts[4] != 17 {
		t.Errorf("starts = %v", starts)
	}
}

// docPages are the hand-written pages: the README, docs/*.md and the
// scripts' README (docs/cli and docs/man are generated from the commands).
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "scripts/README.md"}, pages...)
}

// anchors returns the anchors of the markdown doc's headings, as GitHub
// makes them: lower case, punctuation dropped, spaces made hyphens, a
// repeated one suffixed -1, -2, ...
func anchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocsLinkInside: the pages link nothing outside the repository, and
// every link reaches a file and a heading there. An http(s) URL appears
// only as a literal (in a code span or block: a signer's identity, an
// endpoint in config.yaml), never as a link.
func TestDocsLinkInside(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]*)\)`)
	span := regexp.MustCompile("`[^`]*`")
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		fence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
				continue
			}
			if fence {
				continue
			}
			line = span.ReplaceAllString(line, "``")
			if strings.Contains(line, "http://") || strings.Contains(line, "https://") {
				t.Errorf("%s:%d: a URL outside the repository (link a page of docs/, or quote a literal in `code`): %s", page, i+1, line)
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target, anchor, _ := strings.Cut(m[1], "#")
				if strings.Contains(target, ":") {
					t.Errorf("%s:%d: %s links outside the repository", page, i+1, m[1])
					continue
				}
				file := page
				if target != "" {
					file = filepath.Join(filepath.Dir(page), target)
				}
				if fi, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: %s: %v", page, i+1, m[1], err)
					continue
				} else if fi.IsDir() {
					continue
				}
				doc, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !anchors(string(doc))[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading #%s", page, i+1, m[1], file, anchor)
				}
			}
		}
	}
}
