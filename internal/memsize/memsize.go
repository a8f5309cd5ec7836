// Package memsize reads and prints memory sizes the way Redis does in its
// configuration ("64mb", "1gb", "100k") and in INFO ("1.50M").
package memsize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSyntax is returned by Parse for a size it cannot read.
var ErrSyntax = errors.New("memsize: invalid size (want a number with an optional unit: k, kb, m, mb, g, gb)")

// units are Redis' memtoll suffixes: k/m/g are powers of 1000, kb/mb/gb of
// 1024, case-insensitive.
var units = []struct {
	suffix string
	mul    int64
}{
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
	{"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000},
	{"b", 1},
}

// Parse reads a non-negative size such as "64mb" (64 MiB), "1g" (10^9) or
// "1048576".
func Parse(s string) (int64, error) {
	ls := strings.ToLower(strings.TrimSpace(s))
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(ls, u.suffix) {
			ls, mul = strings.TrimSuffix(ls, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(ls, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return n * mul, nil
}

// Human prints n as INFO's *_human fields do: "512B", "1.50K", "64.00M",
// "1.00G".
func Human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
