package main

import (
	"errors"
	"strings"
)

// splitArgs splits s into words like a POSIX shell does for a simple command
// line: blanks separate words; single quotes keep everything literally;
// double quotes keep blanks and allow \" and \\; a backslash outside quotes
// escapes the next character. An empty pair of quotes gives an empty word (so
// -redis-args '--save ""' works). No expansion of any kind.
func splitArgs(s string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		inTok bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inTok {
				out = append(out, cur.String())
				cur.Reset()
				inTok = false
			}
		case ch == '\'':
			inTok = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case ch == '"':
			inTok = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
		case ch == '\\':
			inTok = true
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
		default:
			inTok = true
			cur.WriteByte(ch)
		}
	}
	if inTok {
		out = append(out, cur.String())
	}
	return out, nil
}

// shellJoin is the inverse of splitArgs, for messages: words that need it
// are single-quoted.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
