package crdt_test

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/crdt"
	"github.com/throttleddb/throttled/replication/crdt/crdttest"
	"github.com/throttleddb/throttled/replication/repltest"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the random tests (0: a new one, printed)")

// seed returns the seed to use, logged so a failure can be replayed with
// -seed.
func seed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", s, s)
	return s
}

// fast ships every millisecond, so tests converge quickly.
var fast = server.Config{CRDT: &server.CRDTConfig{SyncInterval: time.Millisecond}}

// gcraKey is a CL.THROTTLE key of the tests: 10 per second, bursts of 5.
const (
	burst, count, period = 4, 10, 1
)

// admission is one admitted CL.THROTTLE the harness saw.
type admission struct {
	t   int64
	qty int64
}

// exactTAT is what one exact limiter charged with every admission holds:
// the debt recurrence of crdt-design.md 1.1 in time order (events at one
// instant add up, whatever their order).
func exactTAT(adm []admission, p gcra.Params) int64 {
	slices.SortFunc(adm, func(a, b admission) int { return int(min(max(a.t-b.t, -1), 1)) })
	tat := int64(0)
	for _, a := range adm {
		tat = max(tat, a.t) + p.Interval*a.qty
	}
	return tat
}

// peek is the reply an exact limiter with this TAT gives a peek at now.
func peek(tat int64, p gcra.Params, now int64) string {
	_, _, r, err := gcra.Decide(tat, p, now, 0)
	if err != nil {
		panic(err)
	}
	ms := func(ns int64) int64 {
		if ns < 0 {
			return -1
		}
		return gcra.Seconds(ns)
	}
	limited := 0
	if r.Limited {
		limited = 1
	}
	return fmt.Sprint([]any{int64(limited), r.Limit, r.Remaining, ms(r.RetryAfter), ms(r.ResetAfter)})
}

// TestChaos drives random CL.THROTTLE and engine traffic at random nodes of
// a mesh whose network drops, repeats and reorders frames, with partitions
// and restarts (with and without data); once the network is healed and
// quiet, every node holds the same bytes, and its peek equals that of one
// exact limiter charged with every admission any node made.
func TestChaos(t *testing.T) {
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, 1))
	c := crdttest.New(t, 3, s, fast)
	c.Net.SetFaults(crdttest.Faults{Drop: 0.2, Dup: 0.2, MaxDelay: 3 * time.Millisecond})
	p, err := gcra.NewParams(burst, count, period)
	if err != nil {
		t.Fatal(err)
	}
	now := crdttest.Start
	var adm []admission
	for round := range 6 {
		switch rng.IntN(3) {
		case 0:
			a := c.Nodes[rng.IntN(3)]
			var rest []string
			for _, m := range c.Nodes {
				if m != a {
					rest = append(rest, m.Addr)
				}
			}
			t.Logf("round %d: %s cut off", round, a.ID)
			c.Net.Partition([]string{a.Addr}, rest)
		case 1:
			m := c.Nodes[rng.IntN(3)]
			t.Logf("round %d: %s restarts with its data", round, m.ID)
			c.Restart(m, true)
			c.SetClocks(now)
		}
		for range 200 {
			if rng.IntN(10) == 0 {
				now += int64(rng.IntN(150)) * int64(time.Millisecond)
				c.SetClocks(now)
			}
			m := c.Nodes[rng.IntN(3)]
			qty := int64(rng.IntN(3))
			switch rng.IntN(4) {
			case 0:
				c.Do(m, "TB.THROTTLE", "tb", 5, 2, 1, qty)
			case 1:
				c.Do(m, "FWC.THROTTLE", "fwc", 5, 1, qty)
			default:
				r, ok := c.Do(m, "CL.THROTTLE", "k", burst, count, period, qty).([]any)
				if !ok {
					t.Fatalf("CL.THROTTLE on %s: %v", m.ID, r)
				}
				if r[0] == int64(0) && qty > 0 {
					adm = append(adm, admission{t: now, qty: qty})
				}
			}
		}
		c.Net.Heal()
		c.Converged()
		checkExact(t, c, adm, p, now)
	}
	// A restart without data loses nothing once the node's admissions have
	// reached the others.
	c.Restart(c.Nodes[0], false)
	c.SetClocks(now)
	c.Net.SetFaults(crdttest.Faults{})
	c.Converged()
	checkExact(t, c, adm, p, now)
}

// checkExact checks that every node's peek of key k is the exact limiter's
// charged with adm.
func checkExact(t *testing.T, c *crdttest.Cluster, adm []admission, p gcra.Params, now int64) {
	t.Helper()
	want := peek(exactTAT(adm, p), p, now)
	for _, m := range c.Nodes {
		if got := fmt.Sprint(c.Do(m, "CL.THROTTLE", "k", burst, count, period, 0)); got != want {
			t.Fatalf("%s: peek %s, want %s (the exact limiter of %d admissions)", m.ID, got, want, len(adm))
		}
	}
}

// TestCoordinatedBurst: a burst on every node of a partitioned mesh at once
// gets exactly (N-1) x burst more than one limiter allows (the bound is
// tight); after the heal every node carries the whole debt and admits
// nothing until it is repaid.
func TestCoordinatedBurst(t *testing.T) {
	c := crdttest.New(t, 3, seed(t), fast)
	var addrs [][]string
	for _, m := range c.Nodes {
		addrs = append(addrs, []string{m.Addr})
	}
	c.Net.Partition(addrs...)
	admitted := 0
	for _, m := range c.Nodes {
		for range burst + 3 {
			if r := c.Do(m, "CL.THROTTLE", "k", burst, count, period).([]any); r[0] == int64(0) {
				admitted++
			}
		}
	}
	if want := 3 * (burst + 1); admitted != want {
		t.Fatalf("admitted %d in the partition, want %d: each side its burst", admitted, want)
	}
	c.Net.Heal()
	c.Connected()
	c.Converged()
	// The debt: 15 admissions of 100 ms from Start, a TAT of Start+1.5s;
	// a request passes once TAT+T-tau <= now, tau = 5 x 100 ms: from
	// Start+1.1s, where one limiter would have let the next pass at
	// Start+100ms. The 2 x 5 extra units are repaid in exactly 1 s.
	interval := int64(time.Second) / count
	for _, wait := range []int64{0, 11*interval - 1} {
		c.SetClocks(crdttest.Start + wait)
		for _, m := range c.Nodes {
			if r := c.Do(m, "CL.THROTTLE", "k", burst, count, period).([]any); r[0] != int64(1) {
				t.Fatalf("%s at +%dns: %v, want limited until the debt is repaid", m.ID, wait, r)
			}
		}
	}
	c.SetClocks(crdttest.Start + 11*interval)
	if r := c.Do(c.Nodes[1], "CL.THROTTLE", "k", burst, count, period).([]any); r[0] != int64(0) {
		t.Fatalf("after the repayment: %v, want allowed", r)
	}
}

// TestPeers: CRDT PEERS, PEER ADD and REMOVE, and a node that is not a peer
// is refused.
func TestPeers(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	c.Connected()
	a := c.Nodes[0]
	if err, ok := c.Do(a, "CRDT", "PEER", "REMOVE", "n2").(error); ok {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Do(a, "CRDT", "PEERS")); got != "[]" {
		t.Fatalf("CRDT PEERS after REMOVE: %s", got)
	}
	// n2 still dials n1, which now refuses it: n1's key does not reach n2
	// and n2's does not land on n1.
	c.Do(c.Nodes[1], "CL.THROTTLE", "k", 0, 1, 60)
	if got := fmt.Sprint(c.Do(a, "EXISTS", "k")); got != "0" {
		t.Fatalf("a removed peer's key reached n1")
	}
	if err, ok := c.Do(a, "CRDT", "PEER", "ADD", "n2", c.Nodes[1].Addr).(error); ok {
		t.Fatal(err)
	}
	c.Connected()
	c.Converged()
	if got := fmt.Sprint(c.Do(a, "CL.THROTTLE", "k", 0, 1, 60, 0)); got != "[0 1 0 -1 60]" {
		t.Fatalf("after PEER ADD, n1 peeks %s, want n2's admission charged", got)
	}
	for _, bad := range [][]any{{"CRDT", "PEER", "ADD", "n1", "x"}, {"CRDT", "PEER", "ADD", "n2", "x"}, {"CRDT", "PEER", "REMOVE", "n9"}, {"CRDT", "NOPE"}} {
		if _, ok := c.Do(a, bad...).(error); !ok {
			t.Errorf("%v: want an error", bad)
		}
	}
}

// TestConfig: bad settings are refused with a clear error.
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  crdt.Config
		want string
	}{
		{crdt.Config{}, "--node-id is required"},
		{crdt.Config{ID: "a", SyncInterval: -time.Millisecond}, "--crdt-sync-interval"},
		{crdt.Config{ID: "a", MaxSkew: -1}, "--crdt-max-skew"},
		{crdt.Config{ID: "a", Peers: map[string]string{"b": ""}}, "needs an id and an address"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestBound: N clients on N nodes hitting one key. Every syncEvery steps of
// 1 ms the test waits until the nodes have merged everything, so an
// admission reaches every node within lag = syncEvery ms of the debug
// clock. No window [a, b] may then admit more than one limiter's envelope
// L + floor((b-a)/T) plus X = max_i sum_{j != i} a_j(lag), the most the
// other nodes admit within lag, from this run's admissions (crdt-design.md
// section 3).
func TestBound(t *testing.T) {
	const (
		n         = 3
		syncEvery = 4
		steps     = 400
		b, c, p   = 4, 100, 1 // 100 per second: T = 10 ms, L = 5
		ms        = int64(time.Millisecond)
	)
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, 2))
	cl := crdttest.New(t, n, s, fast)
	cl.Connected()
	type adm struct {
		node int
		t    int64
	}
	var got []adm
	now := crdttest.Start
	for step := range steps {
		now += ms
		cl.SetClocks(now)
		for i, m := range cl.Nodes {
			// Bursts now and then, a trickle otherwise.
			k := rng.IntN(2)
			if rng.IntN(40) == 0 {
				k = 8
			}
			for range k {
				if r := cl.Do(m, "CL.THROTTLE", "k", b, c, p).([]any); r[0] == int64(0) {
					got = append(got, adm{i, now})
				}
			}
		}
		if step%syncEvery == syncEvery-1 {
			cl.Converged()
		}
	}
	lag := syncEvery * ms
	// a[j]: the most node j admitted within any window of length lag.
	var a [n]int
	for _, x := range got {
		cnt := 0
		for _, y := range got {
			if y.node == x.node && y.t >= x.t && y.t <= x.t+lag {
				cnt++
			}
		}
		a[x.node] = max(a[x.node], cnt)
	}
	x := 0
	for i := range n {
		sum := 0
		for j := range n {
			if j != i {
				sum += a[j]
			}
		}
		x = max(x, sum)
	}
	interval := int64(time.Second) / c
	worst := -1 << 31
	for _, lo := range got {
		cnt := 0
		for _, hi := range got {
			if hi.t >= lo.t {
				cnt++
				excess := cnt - (b + 1 + int((hi.t-lo.t)/interval))
				worst = max(worst, excess)
				if excess > x {
					t.Fatalf("window [%d, %d] ms admitted %d: %d over the envelope, bound X = %d", (lo.t-crdttest.Start)/ms, (hi.t-crdttest.Start)/ms, cnt, excess, x)
				}
			}
		}
	}
	t.Logf("%d admitted; worst window %d over one limiter's envelope; bound X = %d", len(got), worst, x)
}

// TestConformance: the replication suite, as an eventually consistent mode.
func TestConformance(t *testing.T) {
	repltest.Run(t, repltest.Mode{Eventual: true}, func(t *testing.T, n int) repltest.Cluster {
		return crdttest.New(t, n, seed(t), fast)
	})
}

// TestFoldOnWrite: a debt log is folded where it is written, by the command
// that writes it, once the node's completeness bound has passed its events,
// and its peers take the folded bytes as they are. A key written 300 times
// over 3 s of clock holds one event again after a write made once the
// peers' watermarks have passed the others, on both nodes.
func TestFoldOnWrite(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	c.Connected()
	a := c.Nodes[0]
	dataset := func(m *crdttest.Node) string {
		info := fmt.Sprint(c.Do(m, "INFO", "memory"))
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory_dataset:"); ok {
				return v
			}
		}
		t.Fatalf("no used_memory_dataset in %q", info)
		return ""
	}
	now := crdttest.Start
	write := func() {
		if r := fmt.Sprint(c.Do(a, "CL.THROTTLE", "k", 100000, 1000, 1)); !strings.HasPrefix(r, "[0 ") {
			t.Fatalf("CL.THROTTLE k: %s", r)
		}
	}
	c.SetClocks(now)
	write()
	one := dataset(a) // one event
	for range 300 {
		now += int64(10 * time.Millisecond)
		c.SetClocks(now)
		write()
	}
	c.Converged()
	if grown := dataset(a); grown == one {
		t.Fatalf("300 writes within the skew's reach left the dataset at %s bytes: nothing to fold", grown)
	}
	// Once both nodes' watermarks are a second on, everything before is
	// complete: writes at that one instant add to one event, and the
	// first after the bound has moved folds the rest.
	c.SetClocks(now + int64(time.Second))
	testwait.For(t, 10*time.Second, "k folded to one event on the node that writes it", func() bool {
		write()
		return dataset(a) == one
	})
	// The peer ends with exactly these bytes: the folded state is above
	// anything it holds in the join. (Its dataset is no measure here: the
	// store counts a value's capacity, and a state that arrived in an
	// anti-entropy round has none to spare.)
	folded := c.Do(a, "DEBUG", "DIGEST-VALUE", "k")
	c.Converged()
	for _, m := range c.Nodes {
		if got := c.Do(m, "DEBUG", "DIGEST-VALUE", "k"); fmt.Sprint(got) != fmt.Sprint(folded) {
			t.Fatalf("%s holds k as %v, the folded state is %v", m.ID, got, folded)
		}
	}
}

// TestAloneExpires: a node without peers holds no key past its expiry,
// from its start on (before its first cut, too: the sync interval here is
// longer than the test), as a single node does.
func TestAloneExpires(t *testing.T) {
	c := crdttest.New(t, 1, seed(t), server.Config{CRDT: &server.CRDTConfig{SyncInterval: time.Second}})
	a := c.Nodes[0]
	c.SetClocks(crdttest.Start)
	c.Do(a, "CL.THROTTLE", "k", 0, 1, 1) // full until a second on
	c.SetClocks(crdttest.Start + int64(time.Second) - 1)
	if got := c.Do(a, "EXISTS", "k"); got != int64(1) {
		t.Fatalf("EXISTS k before its expiry: %v", got)
	}
	c.SetClocks(crdttest.Start + int64(time.Second) + int64(time.Millisecond))
	if got := c.Do(a, "EXISTS", "k"); got != int64(0) {
		t.Fatalf("EXISTS k after its expiry, on a node alone: %v, want 0", got)
	}
}

// TestSkewSettingsDiffer: nodes with different --crdt-max-skew refuse each
// other, saying why: each trusts the others to fold its events no later
// than its own margin allows (crdt.Node.Bounds).
func TestSkewSettingsDiffer(t *testing.T) {
	net := crdttest.NewNet(seed(t))
	var logs testlog.Buffer
	peers := map[string]string{"n1": "n1:cluster", "n2": "n2:cluster"}
	for i, skew := range []time.Duration{100 * time.Millisecond, 50 * time.Millisecond} {
		id := fmt.Sprintf("n%d", i+1)
		n, err := servertest.Open(server.Config{
			DebugClock: true, DebugClockStart: crdttest.Start,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)).With("node", id),
			CRDT:   &server.CRDTConfig{NodeID: id, Peers: peers, MaxSkew: skew, SyncInterval: time.Millisecond, Transport: net.Transport(peers[id])},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
	}
	want := `has --crdt-max-skew 50ms, node \"n1\" 100ms: every node needs the same`
	testwait.For(t, 10*time.Second, "the refusal logged", func() bool { return strings.Contains(logs.String(), want) })
}

// TestBusyKey: one key decided 5,000 times on one node of two, 10,000 a
// second, and 100 times on the other, partitioned after the first 2,000. The writer coarsens its log
// (crdt-design.md 1.1), and the peer, which holds the fine copies of the
// events before the partition, drops them for the coarse ones: the nodes
// converge on the debt of every admission, counted once, plus less than
// a quarter of the time elapsed (the drain a coarse event moved later).
func TestBusyKey(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	c.Connected()
	c.SetClocks(crdttest.Start)
	a := c.Nodes[0]
	// 1,000 per second allowed: the debt grows, and the peer's copy from
	// before the partition is still there when it heals.
	const n, step, interval = 5000, 100_000, 1_000_000
	for i := range n {
		if i == 2000 {
			c.Net.Partition([]string{"n1"}, []string{"n2"})
		}
		for _, m := range c.Nodes {
			if err, ok := c.Do(m, "DEBUG", "CLOCK", "ADVANCE", step).(error); ok {
				t.Fatal(err)
			}
		}
		calls := []*crdttest.Node{a}
		if i%50 == 0 {
			// The peer writes too: it folds the writer's events.
			calls = append(calls, c.Nodes[1])
		}
		for _, m := range calls {
			if got := fmt.Sprint(c.Do(m, "CL.THROTTLE", "busy", 10_000, 1_000, 1)); !strings.HasPrefix(got, "[0 ") {
				t.Fatalf("call %d on %s: %s", i, m.ID, got)
			}
		}
	}
	// No write comes after: no fold hides what the join counts.
	c.Net.Heal()
	c.Connected()
	c.Converged()
	first := crdttest.Start + step
	exact := int64(first + (n+n/50)*interval)
	for _, m := range c.Nodes {
		tat, err := m.Client.Get(t.Context(), "busy").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if tat < exact || tat-exact > n*step/4 {
			t.Errorf("%s: TAT %d, exact %d: %+d ns", m.ID, tat, exact, tat-exact)
		}
	}
}

// TestAloneExact: a node with no peers decides exactly as a single node
// even on a key busy enough to be coarsened on a mesh (200 events within
// the skew window): it folds everything before each decision instead.
func TestAloneExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 0))
	c := crdttest.New(t, 1, 1, fast)
	c.SetClocks(crdttest.Start)
	m := c.Nodes[0]
	p := gcra.Params{Burst: 3, Interval: 400_000} // 2,500 per second
	now, tat := crdttest.Start, int64(0)
	for i := range 2000 {
		step := 400_000 + rng.Int64N(200_000) // about 2,000 per second: the debt drains between calls
		now += step
		if err, ok := c.Do(m, "DEBUG", "CLOCK", "ADVANCE", step).(error); ok {
			t.Fatal(err)
		}
		c.Do(m, "CL.THROTTLE", "k", 3, 2500, 1)
		var err error
		if tat, _, _, err = gcra.Decide(tat, p, now, 1); err != nil {
			t.Fatal(err)
		}
		if got, err := m.Client.Get(t.Context(), "k").Int64(); err != nil || got != tat {
			t.Fatalf("call %d: TAT %d (%v), a single node's %d", i, got, err, tat)
		}
	}
}

// TestRoleAndInfo: a mesh node takes writes and has peers, not replicas: to
// Redis-aware tools it is a master with no replicas (ROLE, INFO
// replication), and throttled_mode and the crdt_* lines say it is a mesh.
func TestRoleAndInfo(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	c.Connected()
	a := c.Nodes[0]
	if got := fmt.Sprint(c.Do(a, "ROLE")); got != "[master 0 []]" {
		t.Errorf("ROLE = %s, want [master 0 []]", got)
	}
	info := fmt.Sprint(c.Do(a, "INFO", "replication"))
	for _, want := range []string{"\r\nrole:master\r\n", "\r\nconnected_slaves:0\r\n", "\r\nthrottled_mode:mesh\r\n", "\r\ncrdt_peers:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO replication lacks %q:\n%s", want, info)
		}
	}
	if strings.Contains(info, "slave0:") {
		t.Errorf("INFO replication lists a replica:\n%s", info)
	}
}

// TestIdleQuiet: an idle mesh does not send a watermark every sync
// interval but ever more rarely, and a write wakes its node to ship it at
// once.
func TestIdleQuiet(t *testing.T) {
	cfg := server.Config{CRDT: &server.CRDTConfig{SyncInterval: time.Millisecond, Keepalive: time.Hour}}
	c := crdttest.New(t, 3, seed(t), cfg)
	c.Connected()
	// A measurement, not a wait for something to settle: at one watermark
	// per millisecond the 6 links would carry about 9000 frames; backing
	// off from 1 ms (1, 2, 4... ms apart), each carries about 11.
	f0 := c.Net.Frames()
	time.Sleep(1500 * time.Millisecond)
	if sent := c.Net.Frames() - f0; sent > 6*15 {
		t.Fatalf("an idle mesh sent %d frames in 1.5 s", sent)
	}
	// Each node's next watermark is about half a second away (the one
	// after 1023 ms of rest comes at 2047 ms): only the wake ships the
	// write within a few milliseconds.
	start := time.Now()
	c.Do(c.Nodes[0], "CL.THROTTLE", "idle", 0, 1, 60)
	testwait.For(t, 5*time.Second, "n1's write on n2 and n3", func() bool {
		for _, m := range c.Nodes[1:] {
			if fmt.Sprint(c.Do(m, "CL.THROTTLE", "idle", 0, 1, 60, 0)) != "[0 1 0 -1 60]" {
				return false
			}
		}
		return true
	})
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Fatalf("the write took %v to reach the peers of an idle node", took)
	}
}
