package redisbench

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
)

func TestParseCSV(t *testing.T) {
	const header = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n"
	ok := []struct {
		out  string
		want Figures
	}{
		{header + `"PING_MBULK","88495.58","0.326","0.096","0.295","0.495","0.751","1.287"` + "\n", Figures{88495.58, 0.295, 0.751}},
		{"WARNING: Could not fetch server CONFIG\n" + header + `"CL.THROTTLE k:__rand_int__ 15 30 60","487804.88","1.499","0.328","1.495","2.183","2.383","2.831"` + "\r\n", Figures{487804.88, 1.495, 2.383}},
		// redis-benchmark 6 prints rps only.
		{`"test","rps"` + "\n" + `"PING","1000.00"` + "\n", Figures{RPS: 1000}},
	}
	for _, tc := range ok {
		got, err := ParseCSV(tc.out)
		if err != nil || got != tc.want {
			t.Errorf("ParseCSV(%q) = %v, %v; want %v", tc.out, got, err, tc.want)
		}
	}
	bad := []string{
		"",
		header,
		header + `"PING","0.00","0","0","0","0","0","0"` + "\n",
		header + `"PING","x","0","0","0","0","0","0"` + "\n",
		header + `"PING","1","0","0","0","0","0","0"` + "\n" + `"GET","2","0","0","0","0","0","0"` + "\n",
		header + `"PING","1","0","0","x","0","0","0"` + "\n",
		header + `"PING","1","0","0"` + "\n",
		`"PING","1"` + "\n",
	}
	for _, out := range bad {
		if got, err := ParseCSV(out); err == nil {
			t.Errorf("ParseCSV(%q) = %v, want an error", out, got)
		}
	}
}

func TestArgs(t *testing.T) {
	got, err := Options{Addr: "127.0.0.1:7000", Clients: 50, Requests: 1000, KeySpace: 100000, Pipeline: 16,
		Command: []string{"CL.THROTTLE", "k:__rand_int__", "15", "30", "60"}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-h", "127.0.0.1", "-p", "7000", "-c", "50", "-n", "1000", "-r", "100000", "-P", "16", "-q", "--csv",
		"CL.THROTTLE", "k:__rand_int__", "15", "30", "60"}
	if !slices.Equal(got, want) {
		t.Errorf("Args() = %q\nwant     %q", got, want)
	}
}

func TestRunAgainstRedisServer(t *testing.T) {
	rs, err1 := exec.LookPath("redis-server")
	rb, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		t.Skip("redis-server or redis-benchmark not on PATH")
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := proc.Addr(port)
	p, err := proc.Start(t.Context(), proc.Config{
		Name: "redis-server", Path: rs, Addr: addr, Dir: t.TempDir(), Timeout: 15 * time.Second,
		Args: []string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(port), "--bind", "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	o := Options{Bin: rb, Addr: addr, Clients: 5, Requests: 2000, KeySpace: 1000, Pipeline: 4,
		Command: []string{"INCR", "counter:__rand_int__"}}
	res, err := Run(t.Context(), o)
	if err != nil || res.RPS <= 0 || res.P50 <= 0 || res.P99 < res.P50 {
		t.Fatalf("Run INCR = %+v, %v", res, err)
	}
	bad := o
	bad.Command = []string{"NO.SUCH.COMMAND", "x"}
	if _, err := Run(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "Error from server") {
		t.Errorf("Run unknown command: err = %v, want one showing the server error", err)
	}
	// RunAll: results in the order asked, and a failed run's error.
	get := o
	get.Command = []string{"GET", "counter:__rand_int__"}
	all, err := RunAll(t.Context(), time.Minute, []Options{o, get})
	if err != nil || len(all) != 2 || !strings.Contains(all[0].Command, "INCR") || !strings.Contains(all[1].Command, "GET") {
		t.Fatalf("RunAll = %+v, %v; want the INCR run, then the GET run", all, err)
	}
	if _, err := RunAll(t.Context(), time.Minute, []Options{o, bad}); err == nil || !strings.Contains(err.Error(), "NO.SUCH.COMMAND") {
		t.Errorf("RunAll with a failing run: err = %v, want the failing run's", err)
	}
}

func TestSumAndSeries(t *testing.T) {
	got := Sum([]Result{{Figures: Figures{RPS: 100, P50: 0.5, P99: 2}}, {Figures: Figures{RPS: 50, P50: 0.7, P99: 1}}})
	if want := (Figures{RPS: 150, P50: 0.7, P99: 2}); got != want {
		t.Errorf("Sum = %+v; want %+v", got, want)
	}
	s := Series{{RPS: 1, P50: 2, P99: 3}, {RPS: 4, P50: 5, P99: 6}}
	if !slices.Equal(s.RPS(), []float64{1, 4}) || !slices.Equal(s.P50(), []float64{2, 5}) || !slices.Equal(s.P99(), []float64{3, 6}) {
		t.Errorf("Series columns = %v %v %v", s.RPS(), s.P50(), s.P99())
	}
}
