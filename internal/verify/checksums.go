package verify

import (
	"bytes"
	"fmt"
	"github.com/kubectl-bundle/kubectl-bundle/internal/digest"
	"path"
	"strings"
)

// ChecksumLine is one "<sha256> <path>" line of checksums.txt.
type ChecksumLine struct {
	SHA256 string
	Path   string
}

// ParseChecksums parses checksums.txt as zarf writes it: one
// "<64 lowercase hex> <clean relative path>" per line, a single space between.
// Empty lines are allowed (zarf skips them); anything else malformed, and a path
// listed twice, is an error naming the line.
func ParseChecksums(b []byte) ([]ChecksumLine, error) {
	var out []ChecksumLine
	seen := map[string]int{}
	for i, line := range bytes.Split(b, []byte("\n")) {
		n := i + 1
		if len(line) == 0 {
			continue
		}
		sha, p, ok := strings.Cut(string(line), " ")
		if !ok {
			return nil, fmt.Errorf("checksums.txt line %d: want \"<sha256> <path>\", got %q", n, truncate(string(line), 120))
		}
		if strings.Contains(p, " ") {
			return nil, fmt.Errorf("checksums.txt line %d: more than one space (zarf reads such a line as malformed)", n)
		}
		if !digest.IsSHA256(sha) {
			return nil, fmt.Errorf("checksums.txt line %d: %q is not a lowercase hex sha256", n, truncate(sha, 80))
		}
		if err := checkMemberPath(p); err != nil {
			return nil, fmt.Errorf("checksums.txt line %d: %w", n, err)
		}
		if prev, dup := seen[p]; dup {
			return nil, fmt.Errorf("checksums.txt line %d: %s is already listed on line %d", n, p, prev)
		}
		seen[p] = n
		out = append(out, ChecksumLine{SHA256: sha, Path: p})
	}
	return out, nil
}

// checkMemberPath accepts only clean, relative, slash-separated paths that
// stay inside the package.
func checkMemberPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.ContainsAny(p, "\\\x00\r\n"):
		return fmt.Errorf("path %q contains a backslash, NUL or line break", truncate(p, 120))
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", truncate(p, 120))
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("path %q is not clean", truncate(p, 120))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
