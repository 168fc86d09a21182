package releasefmt

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// SumLine is one line of a sha256sum-format file.
type SumLine struct {
	SHA256 string
	Name   string
}

// ParseSHA256Sums reads a checksums file in the format sha256sum writes and
// `sha256sum -c` reads: "<64 lowercase hex>  <name>" (or " *<name>" for
// binary mode) per line. Names must be plain file names (a release is one
// flat directory), listed once.
func ParseSHA256Sums(b []byte) ([]SumLine, error) {
	var out []SumLine
	seen := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		if line == "" {
			continue
		}
		if len(line) < 67 || !SHA256Re.MatchString(line[:64]) || (line[64:66] != "  " && line[64:66] != " *") {
			return nil, fmt.Errorf("line %d: want \"<sha256>  <name>\", got %q", n, truncate(line, 100))
		}
		name := line[66:]
		if name != path.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00\r") {
			return nil, fmt.Errorf("line %d: %q is not a plain file name", n, truncate(name, 100))
		}
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("line %d: %s is already listed on line %d", n, name, prev)
		}
		seen[name] = n
		out = append(out, SumLine{SHA256: line[:64], Name: name})
	}
	if len(out) == 0 {
		return nil, errors.New("no checksums")
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
