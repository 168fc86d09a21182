package model_test

import (
	"regexp"
	"strings"
)

var commandRE = regexp.MustCompile(`(?:kubectl bundle-[a-z]+|mv |rm |(?:/\S*|\b)scripts/[a-z-]+\.sh|/\S*kubectl-bundle-scripts/[a-z-]+\.sh)[^;|()\n]*`)

var placeholderRE = regexp.MustCompile(`\b[A-Z][A-Z_]+\b`)

// advice is the command an error message tells the operator to run: the
// one after "repair:" or "run:", else the last command on the error's line;
// of alternatives ("A | B") the one for lastActive when there is one.
func advice(out, lastActive string) string {
	var cands []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "error:") && !strings.Contains(line, "repair:") && !strings.Contains(line, "run: ") && !strings.Contains(line, "damaged") {
			continue
		}
		seg := line
		for _, k := range []string{"repair: ", "run: "} {
			if i := strings.LastIndex(line, k); i >= 0 {
				seg = line[i+len(k):]
			}
		}
		// Of alternatives, the one for the slot that serves.
		parts := strings.Split(seg, " | ")
		chosen := parts[0]
		for _, p := range parts {
			if lastActive != "" && strings.Contains(p+" ", " "+lastActive+" ") {
				chosen = p
				break
			}
		}
		// A template (SLOT, PACKAGE) is a hint, not a command.
		for _, m := range commandRE.FindAllString(chosen, -1) {
			// Prose after a comma ("run X, or pass --force") is not the command.
			if i := strings.Index(m, ", "); i >= 0 {
				m = m[:i]
			}
			m = strings.TrimSpace(m)
			for _, prose := range []string{" first", " finishes it"} {
				m = strings.TrimSuffix(m, prose)
			}
			if !placeholderRE.MatchString(m) {
				cands = append(cands, m)
			}
		}
	}
	if len(cands) == 0 {
		return ""
	}
	c := strings.TrimSpace(cands[len(cands)-1])
	return strings.TrimRight(c, ".,:")
}

// damageAdvice is the repair a damage report prints: the command on the
// line that says what is damaged ("" when no line does).
func damageAdvice(out, lastActive string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " is damaged") || strings.Contains(line, " is unreadable") ||
			strings.Contains(line, "is missing, but the history") || strings.Contains(line, "that no crash can lose") {
			if adv := advice(line, lastActive); adv != "" {
				return adv
			}
		}
	}
	return ""
}

func firstError(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "error:") || strings.HasPrefix(line, "FAIL:") || strings.HasPrefix(line, "BROKEN:") {
			if len(line) > 240 {
				line = line[:240] + "..."
			}
			return "| " + line
		}
	}
	return ""
}

func tail(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
