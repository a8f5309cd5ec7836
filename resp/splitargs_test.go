package resp

import (
	"slices"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil: refused
	}{
		{"bind 127.0.0.1 -::1", []string{"bind", "127.0.0.1", "-::1"}},
		{"  port\t6379  ", []string{"port", "6379"}},
		{`requirepass "s3 cret"`, []string{"requirepass", "s3 cret"}},
		{`notify-keyspace-events ""`, []string{"notify-keyspace-events", ""}},
		{`x "a\x41\n" 'it\'s'`, []string{"x", "aA\n", "it's"}},
		{"", []string{}},
		{`bind "127.0.0.1`, nil},
		{`x "a"b`, nil},
		{"x \x00", nil},
	} {
		got, ok := SplitArgs(tc.in)
		if ok != (tc.want != nil) || (ok && !slices.Equal(got, tc.want)) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
