package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := parse([]string{"-stores", "single", "-delays", "0, 25ms", "-modes", "eager,lazy-dyn", "-seconds", "1s", "-window", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.stores) != 1 || len(c.delays) != 2 || c.delays[1] != 25*time.Millisecond || len(c.modes) != 2 || !c.modes[1].lazy || c.modes[1].share >= 0 {
		t.Errorf("got %+v", c)
	}
	for _, args := range [][]string{
		{"-stores", "cluster"}, {"-delays", "-5ms"}, {"-modes", "batch"}, {"-admit", "1.5"},
		{"-seconds", "10s", "-window", "5s"}, {"-keys", "0"}, {"extra"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q): want an error", args)
		}
	}
}

// TestDelayProxy: a round trip through the proxy takes at least twice the
// one-way delay, and the bytes arrive whole and in order.
func TestDelayProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a line echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	const delay = 20 * time.Millisecond
	p, err := newDelayProxy(ln.Addr().String(), delay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, msg := range []string{"one\n", "two\n", strings.Repeat("x", 100000) + "\n"} {
		start := time.Now()
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if took := time.Since(start); err != nil || got != msg || took < 2*delay {
			t.Fatalf("echo of %d bytes: %d bytes back in %v (%v); want them all after at least %v", len(msg), len(got), took, err, 2*delay)
		}
	}
}

// TestMeasure: the study's deviation counts, per key in the order the
// decisions came back, admissions past the limit and refusals below it;
// latencies count after the warm-up.
func TestMeasure(t *testing.T) {
	ms := time.Millisecond
	recs := []record{
		// key 0, limit 2: admitted, refused (under), admitted, admitted (over)
		{key: 0, passed: 1 * ms, allowed: true, latency: 5 * ms, launched: true},
		{key: 0, passed: 2 * ms, allowed: false, latency: 1 * ms, launched: true, started: 10 * ms},
		{key: 0, passed: 3 * ms, allowed: true, latency: 2 * ms, launched: true, started: 10 * ms},
		{key: 0, passed: 4 * ms, allowed: true, latency: 3 * ms, launched: true, started: 10 * ms},
		// key 1: decisions come back out of order: sorted by passed
		{key: 1, passed: 9 * ms, allowed: false, launched: true},
		{key: 1, passed: 8 * ms, allowed: true, launched: true},
		{key: 1, passed: 7 * ms, allowed: true, launched: true},
		{}, // never launched (the case was cut short)
	}
	r := measure(recs, 2, 2, 10*ms)
	if r.requests != 7 || r.admitted != 5 || r.over != 1 || r.under != 1 || r.maxOver != 1 {
		t.Errorf("got %+v", r)
	}
	if r.p50 != 2*ms || r.p99 != 3*ms || r.steady != 3 || r.slow != 2 {
		t.Errorf("p50 %v, p99 %v, %d of %d over 1 ms: want 2ms and 3ms, 2 of 3 (the requests after the warm-up)", r.p50, r.p99, r.slow, r.steady)
	}
	if d := r.deviation(); d < 28.5 || d > 28.6 {
		t.Errorf("deviation %.2f%%, want 2/7", d)
	}
}

// TestRun_Tiny runs the program on a tiny configuration against a real
// throttled: every mode meets its over-admission bound, and the report
// has a row per case.
func TestRun_Tiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs throttled")
	}
	cfg, err := parse([]string{"-stores", "single", "-delays", "0,5ms", "-modes", "per-request,two-layer,eager,lazy",
		"-seconds", "400ms", "-window", "3s", "-keys", "2", "-rate", "200", "-batch", "10", "-pool", "8"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out, logs strings.Builder
	if err := run(context.Background(), cfg, &out, &logs); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	report := out.String()
	if n := strings.Count(report, "| single node |"); n != 8 {
		t.Errorf("%d rows, want 8:\n%s", n, report)
	}
	if strings.Contains(report, "bound ✗") {
		t.Errorf("a mode exceeded its bound:\n%s", report)
	}
	for _, mode := range []string{"| per-request |", "| eager |", "| lazy |", "| two-layer |"} {
		if !strings.Contains(report, mode) {
			t.Errorf("no %s row:\n%s", mode, report)
		}
	}
}
