package main

import (
	"slices"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  --dir /tmp/x  --appendfsync everysec ", []string{"--dir", "/tmp/x", "--appendfsync", "everysec"}},
		{`--save ""`, []string{"--save", ""}},
		{`--save ''`, []string{"--save", ""}},
		{`--name "a b" 'c "d"' e\ f "g\"h"`, []string{"--name", "a b", `c "d"`, "e f", `g"h`}},
	}
	for _, tc := range tests {
		got, err := splitArgs(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`"abc`, `'abc`} {
		if _, err := splitArgs(in); err == nil {
			t.Errorf("splitArgs(%q): want an error", in)
		}
	}
}

// Every headline must name cases and sides that exist in the table.
func TestHeadlinesReferToCases(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Errorf("duplicate case %q", c.Name)
		}
		seen[c.Name] = true
	}
	for _, h := range headlines {
		for _, r := range []ref{h.Num, h.Den} {
			c := findCase(r.Case)
			if c == nil || c.command(r.Side) == nil {
				t.Errorf("headline %q: no %s command for case %q", h.Label, r.Side, r.Case)
			}
		}
	}
}

func TestShellJoinRoundTrip(t *testing.T) {
	args := []string{"--save", "", "a b", "it's", `"q"`, `back\slash`, "$HOME", "plain"}
	got, err := splitArgs(shellJoin(args))
	if err != nil || !slices.Equal(got, args) {
		t.Errorf("splitArgs(shellJoin(%q)) = %q, %v", args, got, err)
	}
}
