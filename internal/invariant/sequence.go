package invariant

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// Sequence is one run's operations and its settings.
type Sequence struct {
	Seed uint64 // the checks' own random choices
	Soak string // the soak window
	// Site is the prepared site the sequence starts from: "" the
	// harness's default; the model's "existing" (slots of the existing
	// provider).
	Site string
	Ops  []string
}

// Shrink drops operations (delta debugging) while still reports that the
// same check fails from a fresh site, for at most budget.
func Shrink(seq Sequence, v *Violation, budget time.Duration, still func(Sequence) *Violation) Sequence {
	ops := append([]string{}, seq.Ops[:min(len(seq.Ops), v.Op+1)]...)
	fails := func(cand []string) bool {
		s := seq
		s.Ops = cand
		got := still(s)
		return got != nil && got.Key == v.Key
	}
	deadline := time.Now().Add(budget)
	n := 2
	for len(ops) >= 2 && time.Now().Before(deadline) {
		chunk := (len(ops) + n - 1) / n
		reduced := false
		for i := 0; i < len(ops); i += chunk {
			cand := append(append([]string{}, ops[:i]...), ops[min(len(ops), i+chunk):]...)
			if len(cand) > 0 && fails(cand) {
				ops, reduced = cand, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if n >= len(ops) {
				break
			}
			n = min(len(ops), 2*n)
		}
	}
	s := seq
	s.Ops = ops
	return s
}

// WriteRegression keeps a sequence in dir: a txtar whose comment says
// what broke (found by test, with seed) and whose "ops" file holds the
// settings and one operation per line.
func WriteRegression(dir, test string, seq Sequence, v *Violation, seed uint64) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.txtar", strings.ToLower(v.Inv), seq.Seed%1000000))
	a := &txtar.Archive{
		Comment: []byte(fmt.Sprintf("%s, found by %s (seed %d), shrunk:\n%s\n", v.Inv, test, seed, FirstLine(v.What))),
		Files:   []txtar.File{{Name: "ops", Data: []byte(fmt.Sprintf("seed %d\nsoak %s\n%s%s\n", seq.Seed, seq.Soak, siteLine(seq.Site), strings.Join(seq.Ops, "\n")))}},
	}
	return path, os.WriteFile(path, txtar.Format(a), 0o644)
}

// siteLine is the line of a kept regression that names its site ("" for
// the default site).
func siteLine(site string) string {
	if site == "" {
		return ""
	}
	return "site " + site + "\n"
}

// ReadSequence reads a kept regression.
func ReadSequence(path string) (Sequence, error) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		return Sequence{}, err
	}
	s := Sequence{Soak: "24h"}
	for _, f := range a.Files {
		if f.Name != "ops" {
			continue
		}
		for _, line := range strings.Split(string(f.Data), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "seed "):
				_, err = fmt.Sscan(strings.TrimPrefix(line, "seed "), &s.Seed)
			case strings.HasPrefix(line, "soak "):
				s.Soak = strings.TrimPrefix(line, "soak ")
			case strings.HasPrefix(line, "site "):
				s.Site = strings.TrimPrefix(line, "site ")
			default:
				s.Ops = append(s.Ops, line)
			}
			if err != nil {
				return s, fmt.Errorf("%s: %v", path, err)
			}
		}
	}
	if len(s.Ops) == 0 {
		return s, fmt.Errorf("%s: no operations", path)
	}
	return s, nil
}

// KnownBug is a break of the promise still open: {name, key, contains},
// a violation whose key holds key and whose text holds contains is
// allowed, by name, until its fix removes the entry.
type KnownBug [3]string

// KnownOpen names the allowance v falls under ("" when none).
func KnownOpen(v *Violation, known []KnownBug) string {
	for _, k := range known {
		if strings.Contains(v.Key, k[1]) && strings.Contains(v.What, k[2]) {
			return k[0]
		}
	}
	return ""
}

// Budget reads a duration from the environment variable name (def when
// it is unset).
func Budget(name string, def time.Duration) (time.Duration, error) {
	b := os.Getenv(name)
	if b == "" {
		return def, nil
	}
	d, err := time.ParseDuration(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", name, err)
	}
	return d, nil
}

// Seed reads a seed from the environment variable name (the time when it
// is unset).
func Seed(name string) (uint64, error) {
	s := os.Getenv(name)
	if s == "" {
		return uint64(time.Now().UnixNano()), nil
	}
	var n uint64
	if _, err := fmt.Sscan(s, &n); err != nil {
		return 0, fmt.Errorf("%s: %v", name, err)
	}
	return n, nil
}
