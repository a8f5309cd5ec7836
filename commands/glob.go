package commands

// globMatch reports whether s matches the Redis glob pattern p: '*' any run,
// '?' one byte, '[abc]', '[^abc]' and '[a-z]' classes, '\' escapes the next
// byte. It follows Redis' stringmatchlen, including its treatment of an
// unterminated class (the class runs to the end of the pattern).
//
// Like Redis since 7.0.9 (CVE-2022-36021) it takes time proportional to
// len(p)*len(s), not exponential in the number of '*': once the pattern after
// a '*' matches no suffix of s, no earlier '*' can help by taking more of s,
// so the search stops. Patterns nested deeper than globMaxNesting '*' match
// nothing, as in Redis.
func globMatch(p, s string) bool {
	skipLonger := false
	return globMatchFrom(p, s, &skipLonger, 0)
}

// globMaxNesting is Redis' bound on the '*' recursion of stringmatchlen.
const globMaxNesting = 1000

func globMatchFrom(p, s string, skipLonger *bool, nesting int) bool {
	if nesting > globMaxNesting {
		return false
	}
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatchFrom(p[1:], s[i:], skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
			}
			*skipLonger = true
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for len(p) > 0 && p[0] != ']' {
				switch {
				case p[0] == '\\' && len(p) >= 2:
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				case len(p) >= 3 && p[1] == '-':
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					if lo <= s[0] && s[0] <= hi {
						match = true
					}
					p = p[2:]
				default:
					if p[0] == s[0] {
						match = true
					}
				}
				p = p[1:]
			}
			if len(p) == 0 {
				// Unterminated class: Redis treats the end of the pattern as
				// its end and steps back onto the last byte.
				p = "]"
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
	}
	return len(s) == 0
}
