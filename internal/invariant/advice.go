package invariant

import (
	"fmt"
	"regexp"
	"strings"
)

var commandRE = regexp.MustCompile(`(?:` + envRE + `)*(?:kubectl bundle-[a-z]+|mv |rm |(?:/\S*|\b)scripts/[a-z-]+\.sh|/\S*kubectl-bundle-scripts/[a-z-]+\.sh)[^;|()\n]*`)

// envRE is a NAME=VALUE word before a printed command (the state dir).
const envRE = `\b[A-Z][A-Z0-9_]*=\S+ `

var anyEnvRE = regexp.MustCompile(envRE)

var placeholderRE = regexp.MustCompile(`\b[A-Z][A-Z_]+\b`)

// Advice is the command an error message tells the operator to run: the
// one after "repair:" or "run:", else the last command on the error's line;
// of alternatives ("A | B") the one for lastActive when there is one.
func Advice(out, lastActive string) string {
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
			// "…/recreate.sh exited 3" reports a step's outcome: no advice.
			if strings.Contains(m, " exited ") {
				continue
			}
			if !placeholderRE.MatchString(anyEnvRE.ReplaceAllString(m, "")) {
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

// DamageAdvice is the repair a damage report prints: the command on the
// line that says what is damaged ("" when no line does).
func DamageAdvice(out, lastActive string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " is damaged") || strings.Contains(line, " is unreadable") ||
			strings.Contains(line, "is missing, but the history") || strings.Contains(line, "that no crash can lose") {
			if adv := Advice(line, lastActive); adv != "" {
				return adv
			}
		}
	}
	return ""
}

// FirstError is the first error line of out, for the log ("" when none).
func FirstError(out string) string {
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

// Tail is the last lines of out, indented for a report.
func Tail(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	if i := strings.Index(s, "\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// TailLines is the last n lines of a log, indented.
func TailLines(log []string, n int) string {
	if len(log) > n {
		log = log[len(log)-n:]
	}
	return "    " + strings.Join(log, "\n    ")
}

// SplitLine splits a printed command line as a shell would: leading
// NAME=VALUE words are its environment; single and double quotes group
// words; a comment ends it.
func SplitLine(line string) (env, argv []string, err error) {
	var words []string
	var cur strings.Builder
	in, has := rune(0), false
	for _, c := range line {
		switch {
		case in == 0 && c == '#' && !has && cur.Len() == 0:
			// A comment: the rest of the line is not the command.
			goto done
		case in != 0 && c == in:
			in = 0
		case in != 0:
			cur.WriteRune(c)
		case c == '\'' || c == '"':
			in, has = c, true
		case c == ' ' || c == '\t':
			if has || cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(c)
		}
	}
done:
	if in != 0 {
		return nil, nil, fmt.Errorf("unbalanced quote in %q", line)
	}
	if has || cur.Len() > 0 {
		words = append(words, cur.String())
	}
	i := len(Modifiers(words))
	return words[:i], words[i:], nil
}
