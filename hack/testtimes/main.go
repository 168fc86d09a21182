// Command testtimes reads `go test -json` on stdin, prints what go test
// would have printed without -json (a package's lines; a test's only when
// it fails or had not ended when its package did, as a timeout's), and
// ends with where the time went:
// each package's wall time and the slowest tests, so a run that comes
// close to go test's alarm says which tests to look at (make test pipes
// its go test through it).
//
//	go test -json ./... | testtimes [-top N]
//
// Lines that are not JSON (a build failure's) are printed as they are.
// Its exit code is 0: the caller keeps go test's.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type timing struct {
	pkg, test, result string
	secs              float64
}

func main() {
	top := flag.Int("top", 15, "how many of the slowest tests to list")
	flag.Parse()
	pkgs, tests, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
	}
	report(os.Stdout, pkgs, tests, *top)
}

// summarize copies the output of the events on in to out and returns
// the packages' and tests' timings.
func summarize(in io.Reader, out io.Writer) (pkgs, tests []timing, err error) {
	// held: each running test's output, printed if it fails.
	held := map[string]map[string]*strings.Builder{}
	flush := func(pkg, test string) {
		if b := held[pkg][test]; b != nil {
			io.WriteString(out, b.String())
			delete(held[pkg], test)
		}
	}
	flushPackage := func(pkg string) {
		names := make([]string, 0, len(held[pkg]))
		for name := range held[pkg] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			flush(pkg, name)
		}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		if e.Test == "" {
			if e.Action == "fail" || strings.HasPrefix(e.Output, "FAIL") {
				flushPackage(e.Package)
			}
			if e.Output != "PASS\n" { // -json's -v; go test without it prints none
				io.WriteString(out, e.Output)
			}
		} else if e.Output != "" {
			if held[e.Package] == nil {
				held[e.Package] = map[string]*strings.Builder{}
			}
			b := held[e.Package][e.Test]
			if b == nil {
				b = &strings.Builder{}
				held[e.Package][e.Test] = b
			}
			b.WriteString(e.Output)
		}
		switch e.Action {
		case "pass", "skip":
			delete(held[e.Package], e.Test)
		case "fail":
			flush(e.Package, e.Test)
		}
		if e.Action != "pass" && e.Action != "fail" {
			continue
		}
		t := timing{pkg: e.Package, test: e.Test, result: e.Action, secs: e.Elapsed}
		if e.Test == "" {
			pkgs = append(pkgs, t)
		} else {
			tests = append(tests, t)
		}
	}
	pkgNames := make([]string, 0, len(held))
	for pkg := range held {
		pkgNames = append(pkgNames, pkg)
	}
	sort.Strings(pkgNames)
	for _, pkg := range pkgNames {
		flushPackage(pkg)
	}
	return pkgs, tests, sc.Err()
}

// report prints the packages of more than a second, slowest first, and
// the top slowest tests (subtests included; a parent's time holds its
// parallel subtests' wait).
func report(out io.Writer, pkgs, tests []timing, top int) {
	if len(pkgs) == 0 {
		return
	}
	byTime := func(ts []timing) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].secs > ts[j].secs })
	}
	byTime(pkgs)
	byTime(tests)
	fmt.Fprintln(out, "--- where the time went (wall seconds)")
	for _, p := range pkgs {
		if p.secs < 1 {
			break
		}
		fmt.Fprintf(out, "%9.1f  %s %s\n", p.secs, p.result, p.pkg)
	}
	fmt.Fprintf(out, "--- the %d slowest tests\n", min(top, len(tests)))
	for i, t := range tests {
		if i == top {
			break
		}
		fmt.Fprintf(out, "%9.1f  %s %s %s\n", t.secs, t.result, short(t.pkg), t.test)
	}
}

// short is a package path's last two elements.
func short(pkg string) string {
	parts := strings.Split(pkg, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/")
}
