package policy

import "strings"

// Path normalization and templates.
//
// A request path is brought to one canonical form before it is matched, so
// that the spellings of one resource reach one template (and one policy,
// and one set of keys), and the spellings an attacker can vary freely do
// not mint new endpoints:
//
//   - the query string and fragment are dropped;
//   - percent-escapes of unreserved characters (letters, digits, - . _ ~)
//     are decoded, once, and the other escapes keep their byte with the
//     hex digits in upper case (%2f and %2F are one spelling; %2F is not
//     a slash, so "a%2Fb" stays one segment); a malformed escape makes the
//     path invalid;
//   - "." and ".." segments are resolved (RFC 3986 section 5.2.4; ".." at
//     the root stays at the root), after decoding, so %2e%2e is ".." too;
//   - empty segments (repeated slashes, a trailing slash) are dropped.
//
// An invalid path (not starting with "/", a malformed escape, a control
// byte) matches no template: it is the UNKNOWN endpoint, never a key of its
// own.

// Normalize returns the canonical segments of a request path, and false
// when the path is invalid.
func Normalize(path string) ([]string, bool) {
	return AppendNormalized(make([]string, 0, 8), path)
}

// AppendNormalized is Normalize appending the segments to segs, which a
// caller can reuse between calls; a clean path's segments alias it. It
// reads the path once: only a segment holding an escape is decoded.
func AppendNormalized(segs []string, path string) ([]string, bool) {
	if path == "" || path[0] != '/' {
		return nil, false
	}
	start, escaped := 1, false
	for i := 1; ; i++ {
		last := i == len(path) || path[i] == '?' || path[i] == '#'
		if !last && path[i] != '/' {
			if c := path[i]; c <= ' ' || c == 0x7f {
				return nil, false
			}
			escaped = escaped || path[i] == '%'
			continue
		}
		seg := path[start:i]
		if escaped {
			var ok bool
			if seg, ok = decodeSegment(seg); !ok {
				return nil, false
			}
		}
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
		if last {
			return segs, true
		}
		start, escaped = i+1, false
	}
}

// Join is the path of canonical segments: "/" and the segments.
func Join(segs []string) string { return "/" + strings.Join(segs, "/") }

// decodeSegment decodes the unreserved characters' escapes of one segment
// and upper-cases the others' hex digits; false for a malformed escape or a
// byte no path may hold (controls, space, DEL).
func decodeSegment(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] == 0x7f {
				return "", false
			}
		}
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c == 0x7f:
			return "", false
		case c != '%':
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		v := unhex(s[i+1])<<4 | unhex(s[i+2])
		if unreserved(v) {
			b.WriteByte(v)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[v>>4])
			b.WriteByte(upperHex[v&15])
		}
		i += 2
	}
	return b.String(), true
}

const upperHex = "0123456789ABCDEF"

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unreserved is RFC 3986's unreserved set: decoding it changes no meaning.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// A Template is a parsed path template: "/v1/orgs/{org}/items/*/**".
// Literal segments are written in the canonical form of Normalize; "*" and
// "{name}" match one segment, "**" (last only) the rest of the path, none
// included. The zero Template is invalid.
type Template struct {
	segs []string // literal segments, "*" for one, "**" for the rest
}

// ParseTemplate parses and checks a template.
func ParseTemplate(s string) (Template, error) {
	if !strings.HasPrefix(s, "/") {
		return Template{}, errorf("%q does not start with /", s)
	}
	if strings.ContainsAny(s, "?#") {
		return Template{}, errorf("%q has a query or fragment", s)
	}
	var t Template
	seen := map[string]bool{}
	parts := strings.Split(s[1:], "/")
	for i, raw := range parts {
		if raw == "" {
			if i == len(parts)-1 {
				continue // a trailing slash, as Normalize drops it
			}
			return Template{}, errorf("%q has an empty segment", s)
		}
		switch {
		case raw == "**":
			if i != len(parts)-1 {
				return Template{}, errorf("%q has ** before its last segment", s)
			}
		case raw == "*":
		case strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}"):
			name := raw[1 : len(raw)-1]
			if !isIdent(name) {
				return Template{}, errorf("%q: %q is not a parameter name (letters, digits, _)", s, name)
			}
			if seen[name] {
				return Template{}, errorf("%q names {%s} twice", s, name)
			}
			seen[name] = true
			raw = "*"
		case strings.ContainsAny(raw, "{}*"):
			return Template{}, errorf("%q: segment %q mixes text with {, } or *", s, raw)
		default:
			seg, ok := decodeSegment(raw)
			if !ok || seg == "." || seg == ".." {
				return Template{}, errorf("%q: segment %q is not a canonical path segment", s, raw)
			}
			raw = seg
		}
		t.segs = append(t.segs, raw)
	}
	return t, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// Shape is the template's canonical text, parameters written as "*": two
// templates with one shape match the same paths and are one endpoint.
func (t Template) Shape() string { return "/" + strings.Join(t.segs, "/") }
