package policy

import (
	"slices"
	"testing"
)

// TestNormalize_Corpus is the endpoint-aware study's A3: spellings of one
// path that must reach one canonical form, and spellings that must not.
func TestNormalize_Corpus(t *testing.T) {
	same := map[string][]string{
		"/api/login": {
			"/api/login", "/api//login", "/api/login/", "//api///login//", "/api/x/../login",
			"/api/./login", "/api/login?next=/admin", "/api/login#frag", "/%61pi/login",
			"/api/%6C%6F%67%69%6E", "/api/%2e%2e/api/login", "/../api/login", "/api/x/y/../../login",
			"/api/%2E/login",
		},
		"/":          {"/", "//", "/.", "/..", "/a/..", "/?q", "/./../"},
		"/a%2Fb":     {"/a%2fb", "/a%2Fb", "/a%2fb/"},
		"/a~b_c-d.e": {"/a%7Eb%5Fc%2Dd%2Ee", "/a~b_c-d.e"},
		"/caf%C3%A9": {"/caf%c3%a9", "/caf%C3%A9"},
		"/%25252e":   {"/%25252e"},
	}
	for want, inputs := range same {
		for _, in := range inputs {
			segs, ok := Normalize(in)
			if !ok || Join(segs) != want {
				t.Errorf("Normalize(%q) = %q, %v; want %q", in, Join(segs), ok, want)
			}
		}
	}
	// Distinct resources stay distinct: case, an encoded slash, a
	// double-encoded dot segment.
	distinct := [][2]string{
		{"/api/login", "/API/login"},
		{"/api/login", "/api/login%2F"},
		{"/api/login", "/api%2Flogin"},
		{"/api/login", "/api/%252e%252e/login"},
		{"/a/b", "/a%2Fb"},
	}
	for _, d := range distinct {
		a, _ := Normalize(d[0])
		b, okb := Normalize(d[1])
		if okb && slices.Equal(a, b) {
			t.Errorf("%q and %q normalize to one path %q", d[0], d[1], Join(a))
		}
	}
	for _, bad := range []string{"", "api/login", "*", "/a%", "/a%2", "/a%zz", "/a b", "/a\x00", "/a\x7f", "http://x/a"} {
		if segs, ok := Normalize(bad); ok {
			t.Errorf("Normalize(%q) = %q, want invalid", bad, Join(segs))
		}
	}
}

func TestParseTemplate(t *testing.T) {
	good := map[string]string{
		"/":                           "/",
		"/v1/orgs/{org}/product/{id}": "/v1/orgs/*/product/*",
		"/a/*/b":                      "/a/*/b",
		"/a/**":                       "/a/**",
		"/**":                         "/**",
		"/a/":                         "/a",
		"/%61/%2f":                    "/a/%2F",
	}
	for in, shape := range good {
		tm, err := ParseTemplate(in)
		if err != nil || tm.Shape() != shape {
			t.Errorf("ParseTemplate(%q) = %q, %v; want %q", in, tm.Shape(), err, shape)
		}
	}
	for _, bad := range []string{"", "a", "/a//b", "/a/**/b", "/{}", "/{1x}", "/{a}/{a}", "/a{b}", "/a*", "/..", "/./a", "/a?x", "/a#x", "/%zz", "/a b"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("ParseTemplate(%q) accepted", bad)
		}
	}
}

// TestTemplate_Match: what one template matches, through a table's trie.
func TestTemplate_Match(t *testing.T) {
	tests := []struct {
		tmpl, path string
		ok         bool
	}{
		{"/v1/orgs/{org}/product/{id}", "/v1/orgs/acme/product/42", true},
		{"/v1/orgs/{org}/product/{id}", "/v1/orgs/acme/product", false},
		{"/v1/orgs/{org}/product/{id}", "/v1/orgs/acme/product/42/x", false},
		{"/a/*", "/a/b", true},
		{"/a/*", "/a", false},
		{"/a/**", "/a", true},
		{"/a/**", "/a/b/c/d", true},
		{"/a/**", "/b", false},
		{"/", "/", true},
		{"/", "/a", false},
		{"/**", "/", true},
	}
	for _, tt := range tests {
		if got := matches(t, tt.tmpl, tt.path); got != tt.ok {
			t.Errorf("%s on %s: %v, want %v", tt.tmpl, tt.path, got, tt.ok)
		}
	}
}

// matches reports whether a table of one policy on tmpl decides path by it.
func matches(t testing.TB, tmpl, path string) bool {
	t.Helper()
	table, err := New([]Policy{{ID: "p", Path: tmpl, Tiers: fwc(1)}})
	if err != nil {
		t.Fatalf("%s: %v", tmpl, err)
	}
	_, p := table.Decide(Request{Method: "GET", Target: path})
	return p != nil
}

// FuzzNormalize: never panics; a canonical path is its own normal form and
// has no empty, "." or ".." segment.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/api//login", "/a/../b", "/%2e%2E/x", "/a%2fb?x#y", "/%", "/caf%c3%a9/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		segs, ok := Normalize(path)
		if !ok {
			return
		}
		again, ok := Normalize(Join(segs))
		if !ok || !slices.Equal(again, segs) {
			t.Fatalf("%q -> %q -> %q, %v", path, Join(segs), Join(again), ok)
		}
		for _, s := range segs {
			if s == "" || s == "." || s == ".." {
				t.Fatalf("%q -> segment %q", path, s)
			}
		}
	})
}

// FuzzTemplate: never panics; a template's shape parses to itself, and a
// path made from the template (each wildcard filled) is decided by its
// policy.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"/v1/orgs/{org}/product/{id}", "/a/**", "/*", "/%61/b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTemplate(s)
		if err != nil {
			return
		}
		again, err := ParseTemplate(tm.Shape())
		if err != nil || again.Shape() != tm.Shape() {
			t.Fatalf("%q -> %q -> %q, %v", s, tm.Shape(), again.Shape(), err)
		}
		var segs []string
		for _, seg := range tm.segs {
			switch seg {
			case "**":
				segs = append(segs, "x", "y")
			case "*":
				segs = append(segs, "v")
			default:
				segs = append(segs, seg)
			}
		}
		if len(s) <= MaxNameLen && !matches(t, s, Join(segs)) {
			t.Fatalf("%q does not match its own path %q", s, Join(segs))
		}
	})
}
