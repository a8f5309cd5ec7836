package main

import (
	"io"
	"slices"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-keys", "10, 20", "-kinds", "fwc,cl"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.keys, []int{10, 20}) || len(c.kinds) != 2 || c.kinds[0].name != "fwc" || c.kinds[1].name != "cl" {
		t.Errorf("got %+v", c)
	}
	for _, args := range [][]string{{"-keys", "0"}, {"-keys", "10000001"}, {"-keys", "x"}, {"-kinds", "swl"}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}

func TestKeyName(t *testing.T) {
	for _, i := range []int{0, 1, 9_999_999} {
		if got := keyName(i); len(got) != 15 {
			t.Errorf("keyName(%d) = %q, %d bytes; want 15", i, got, len(got))
		}
	}
	if got := keyName(1); got != "rl:user:0000001" {
		t.Errorf("keyName(1) = %q", got)
	}
}

func TestParseGCTrace(t *testing.T) {
	out := "time=x level=INFO msg=listening\n" +
		"gc 1 @0.010s 2%: 0.020+1.5+0.004 ms clock, 0.040+0.5/1.0/0+0.008 ms cpu, 4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 2 @5.000s 3%: 0.300+40+0.050 ms clock, 0.6+10/20/0+0.1 ms cpu, 90->90->80 MB, 100 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)\n" +
		"gc 3 @9.000s 3%: 0.010+30+0.700 ms clock, 0.02+5/10/0+1.4 ms cpu, 90->90->80 MB, 160 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)\n"
	g := parseGCTrace(out)
	if g.cycles != 3 || g.worstPauseMs != 0.7 || g.lastForcedMarkMs != 30 {
		t.Errorf("got %+v", g)
	}
	if want := 0.040 + 0.5 + 1.0 + 0.008 + 0.6 + 10 + 20 + 0.1 + 0.02 + 5 + 10 + 1.4; g.cpuMs < want-1e-9 || g.cpuMs > want+1e-9 {
		t.Errorf("cpuMs = %v, want %v", g.cpuMs, want)
	}
	g.processCPU = 1000 * time.Millisecond
	if s := g.share(); s < 0.048 || s > 0.049 {
		t.Errorf("share = %v", s)
	}
}
