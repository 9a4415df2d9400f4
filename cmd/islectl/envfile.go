package main

import (
	"fmt"
	"strings"
)

// parseEnvFile reads variables written as a shell would source them, in
// the subset payment.env uses: lines `[export ]NAME=VALUE`, blank lines and
// # comments (at the start of a word, as in the shell); VALUE a word of
// plain characters, single-quoted text (which may span lines) and
// backslash escapes, as bash reads it. What would be
// expanded or run ($, `, double quotes) is refused rather than guessed.
func parseEnvFile(text string) (map[string]string, error) {
	vars := map[string]string{}
	for i := 0; i < len(text); {
		lineErr := func(format string, a ...any) error {
			return fmt.Errorf("line %d: %s", strings.Count(text[:i], "\n")+1, fmt.Sprintf(format, a...))
		}
		i = skipBlanks(text, i)
		switch {
		case i == len(text):
			continue
		case text[i] == '\n':
			i++
			continue
		case text[i] == '#':
			i = endOfLine(text, i)
			continue
		}
		if rest, ok := strings.CutPrefix(text[i:], "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			i = skipBlanks(text, i+len("export"))
		}
		j := i
		for j < len(text) && isNameByte(text[j], j == i) {
			j++
		}
		if j == i || j == len(text) || text[j] != '=' {
			return nil, lineErr("want NAME=VALUE")
		}
		name := text[i:j]
		var v strings.Builder
		for i = j + 1; i < len(text) && !strings.ContainsRune(" \t\n", rune(text[i])); {
			switch c := text[i]; c {
			case '\'':
				end := strings.IndexByte(text[i+1:], '\'')
				if end < 0 {
					return nil, lineErr("%s: unterminated single quote", name)
				}
				v.WriteString(text[i+1 : i+1+end])
				i += end + 2
			case '\\':
				if i+1 == len(text) {
					return nil, lineErr("%s: backslash at the end", name)
				}
				if text[i+1] != '\n' { // a backslash-newline joins lines
					v.WriteByte(text[i+1])
				}
				i += 2
			case '"', '$', '`', ';', '&', '|', '<', '>', '(', ')':
				return nil, lineErr("%s: %q is not supported here (single-quote the value)", name, c)
			default:
				v.WriteByte(c)
				i++
			}
		}
		if i = skipBlanks(text, i); i < len(text) && text[i] != '\n' && text[i] != '#' {
			return nil, lineErr("%s: text after the value", name)
		}
		vars[name] = v.String()
	}
	return vars, nil
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func endOfLine(s string, i int) int {
	if n := strings.IndexByte(s[i:], '\n'); n >= 0 {
		return i + n
	}
	return len(s)
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || !first && '0' <= c && c <= '9'
}
