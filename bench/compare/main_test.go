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

func TestMedianAndFormat(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
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
