package memsize

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1048576", 1 << 20}, {"64mb", 64 << 20}, {"64MB", 64 << 20}, {"1gb", 1 << 30},
		{"100k", 100_000}, {"2kb", 2048}, {"1m", 1_000_000}, {"3g", 3_000_000_000}, {"10b", 10},
	} {
		if got, err := Parse(tc.in); err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "mb", "-1", "1.5mb", "1tb", "x", "99999999999gb"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want ErrSyntax", bad, err)
		}
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1536: "1.50K", 64 << 20: "64.00M", 1 << 30: "1.00G"} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
}
