package e2e

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
	"github.com/throttleddb/throttled/internal/tcpproxy"
	"github.com/throttleddb/throttled/internal/testwait"
)

// The active-active mode (--replication crdt) across real processes: three
// nodes on loopback, each reaching each of its peers through a
// tcpproxy.Proxy of its own (node i's --peers entry for j is the proxy
// i->j, which forwards to j's --cluster-addr), so that a test can cut any
// set of directed links, as a partition does.

var seedFlag = flag.Uint64("seed", 0, "seed of the random choices of the TestCrdt_* tests; 0 picks a new one each run")

// newRand returns the test's random source, from -seed or a new seed. The
// seed replays the test's choices (which node, how long each phase, which
// key each call takes, the clients' pauses), not the scheduling of the
// processes.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: go test -race -run '^%s$' -seed %d ./e2e/", t.Name(), seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// meshNode is one node of a test mesh.
type meshNode struct {
	id      string
	cluster string   // its --cluster-addr
	dir     string   // its data folder
	args    []string // its arguments, but --port and --dir
	srv     *server  // its process (the last one started)
	c       *redis.Client
	readyAt time.Time // when it first answered PING after its last start
}

// mesh is n nodes of a CRDT mesh and the proxies between them.
type mesh struct {
	t     *testing.T
	nodes []*meshNode
	// proxy[i][j] carries node i's link to node j (nil for i == j).
	proxy [][]*tcpproxy.Proxy
}

// newMesh starts n nodes (ids a, b, c, ...) with extra arguments, each
// with a data folder of its own. With blocked, every proxy is blocked
// before the nodes start: no node reaches another until heal.
func newMesh(t *testing.T, n int, blocked bool, extra ...string) *mesh {
	t.Helper()
	m := &mesh{t: t, proxy: make([][]*tcpproxy.Proxy, n)}
	clusters := map[string]bool{}
	for i := range n {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		nd := &meshNode{id: string(rune('a' + i)), cluster: proc.Addr(port), dir: t.TempDir()}
		clusters[nd.cluster] = true
		m.nodes = append(m.nodes, nd)
	}
	for i := range n {
		m.proxy[i] = make([]*tcpproxy.Proxy, n)
		var peers []string
		for j := range n {
			if i == j {
				continue
			}
			p := m.newProxy(m.nodes[j].cluster, clusters)
			if blocked {
				p.Block()
			}
			m.proxy[i][j] = p
			peers = append(peers, m.nodes[j].id+"="+p.Addr())
		}
		nd := m.nodes[i]
		nd.args = append([]string{"--replication", "crdt", "--node-id", nd.id, "--cluster-addr", nd.cluster,
			"--peers", strings.Join(peers, ",")}, extra...)
	}
	for i := range n {
		m.start(i)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, nd := range m.nodes {
				t.Logf("--- node %s (%s) output ---\n%s", nd.id, nd.srv.CommandLine(), tail(nd.srv.Output(), 40))
			}
		}
	})
	return m
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// newProxy starts a proxy to target, closed when the test ends. A proxy
// the OS put on a port chosen as a node's cluster address (free until that
// node starts) is replaced.
func (m *mesh) newProxy(target string, clusters map[string]bool) *tcpproxy.Proxy {
	m.t.Helper()
	for {
		p, err := tcpproxy.New(target)
		if err != nil {
			m.t.Fatal(err)
		}
		if !clusters[p.Addr()] {
			m.t.Cleanup(func() { p.Close() })
			return p
		}
		p.Close()
	}
}

// start starts node i on its folder, on a new RESP port, and records when
// it first answered PING. The process is stopped when the test ends.
func (m *mesh) start(i int) {
	t := m.t
	t.Helper()
	nd := m.nodes[i]
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := proc.Addr(port)
	var ready time.Time
	p, err := proc.Start(context.Background(), proc.Config{
		Name: "throttled " + nd.id, Path: bin, Addr: addr, Timeout: 60 * time.Second,
		Args: append([]string{"--port", strconv.Itoa(port), "--dir", nd.dir}, nd.args...),
		Ready: func(ctx context.Context) error {
			err := respconn.Ping(ctx, addr)
			if err == nil {
				ready = time.Now()
			}
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%v\n%s", err, p.Output())
		}
	})
	nd.srv = &server{Process: p, dir: nd.dir, args: nd.args}
	nd.c = nd.srv.client(t)
	nd.readyAt = ready
}

// setLinks blocks the links between the nodes of side and the others
// (both ways), and heals every other link.
func (m *mesh) setLinks(side []int) {
	for i := range m.nodes {
		for j := range m.nodes {
			if i == j {
				continue
			}
			if slices.Contains(side, i) != slices.Contains(side, j) {
				m.proxy[i][j].Block()
			} else {
				m.proxy[i][j].Heal()
			}
		}
	}
}

// isolate blocks every link from and to node i.
func (m *mesh) isolate(i int) { m.setLinks([]int{i}) }

// heal heals every link.
func (m *mesh) heal() { m.setLinks(nil) }

// peerRow is one row of CRDT PEERS.
type peerRow struct {
	id, addr  string
	connected bool
	lagMs     int64
}

func crdtPeers(c *redis.Client) ([]peerRow, error) {
	v, err := c.Do(context.Background(), "CRDT", "PEERS").Slice()
	if err != nil {
		return nil, err
	}
	var rows []peerRow
	for _, r := range v {
		f, ok := r.([]any)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("CRDT PEERS row %v: want [id, addr, connected, lag_ms]", r)
		}
		id, _ := f[0].(string)
		addr, _ := f[1].(string)
		conn, _ := f[2].(int64)
		lag, _ := f[3].(int64)
		rows = append(rows, peerRow{id: id, addr: addr, connected: conn == 1, lagMs: lag})
	}
	return rows, nil
}

// linksAre reports whether CRDT PEERS on the nodes up shows node i
// connected to node j exactly when want(i, j), and what it showed.
func (m *mesh) linksAre(up []int, want func(i, j int) bool) (bool, string) {
	ok := true
	var b strings.Builder
	for _, i := range up {
		rows, err := crdtPeers(m.nodes[i].c)
		fmt.Fprintf(&b, "%s: %v %v; ", m.nodes[i].id, rows, err)
		if err != nil || len(rows) != len(m.nodes)-1 {
			ok = false
			continue
		}
		for _, r := range rows {
			j := int(r.id[0] - 'a')
			if r.connected != want(i, j) {
				ok = false
			}
		}
	}
	return ok, b.String()
}

// waitLinks waits until linksAre holds on every node, and returns how long
// that took.
func (m *mesh) waitLinks(within time.Duration, what string, want func(i, j int) bool) time.Duration {
	m.t.Helper()
	all := make([]int, len(m.nodes))
	for i := range all {
		all[i] = i
	}
	begin := time.Now()
	var seen string
	for {
		ok, s := m.linksAre(all, want)
		if ok {
			return time.Since(begin)
		}
		seen = s
		if time.Since(begin) > within {
			m.t.Fatalf("%s: not within %v; CRDT PEERS: %s", what, within, seen)
		}
		time.Sleep(time.Millisecond) // polling
	}
}

func allLinks(i, j int) bool { return true }

// alike reads DEBUG DIGEST and the replies of peeks on every node, and
// reports whether every node answered alike, and what they answered.
func (m *mesh) alike(peeks [][]any) (bool, string) {
	ctx := context.Background()
	var b strings.Builder
	var first []string
	same := true
	for i, nd := range m.nodes {
		var got []string
		d, err := nd.c.Do(ctx, "DEBUG", "DIGEST").Text()
		got = append(got, fmt.Sprint(d, err))
		for _, p := range peeks {
			v, err := nd.c.Do(ctx, p...).Result()
			got = append(got, fmt.Sprint(v, err))
			if err != nil {
				same = false
			}
		}
		if err != nil {
			same = false
		}
		if i == 0 {
			first = got
		} else if !slices.Equal(got, first) {
			same = false
		}
		fmt.Fprintf(&b, "\n  %s: %s", nd.id, strings.Join(got, " "))
	}
	return same, b.String()
}

// waitAlike polls alike until every node answers alike, for up to
// within; it returns the time it first saw that.
func (m *mesh) waitAlike(within time.Duration, peeks [][]any) time.Time {
	m.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, seen := m.alike(peeks)
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the nodes did not converge within %v:%s", within, seen)
		}
		time.Sleep(time.Millisecond) // polling
	}
}

// outcome is how a call of the load ended.
type outcome int8

const (
	admitted outcome = iota
	limited
	failed // an error: it may or may not have been admitted
)

// call is one call of the load, with the wall clock (Unix ns) read just
// before it was sent and just after its reply came.
type call struct {
	node       int
	keys       []string // the limits it called
	sent, recv int64
	out        outcome
	err        error
}

// load is clients sending calls to nodes until stopped.
type load struct {
	stopping atomic.Bool
	wg       sync.WaitGroup
	replies  []atomic.Int64 // per node: calls answered so far

	mu    sync.Mutex // guards calls
	calls []call
}

// startLoad starts workers clients on each node of nodes. Each sends the
// call next picks (with a random source of its own, seeded from rng),
// pausing 0-2 ms (seeded) between calls, until stop (at the latest when
// the test ends); a client whose call fails (its node died) records the
// call and ends.
func (m *mesh) startLoad(rng *rand.Rand, nodes []int, workers int, next func(r *rand.Rand, node int) (keys []string, args []any)) *load {
	l := &load{replies: make([]atomic.Int64, len(m.nodes))}
	m.t.Cleanup(func() { l.stop() })
	for _, i := range nodes {
		for range workers {
			r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			c := redis.NewClient(&redis.Options{Addr: m.nodes[i].srv.Addr, Protocol: 2, MaxRetries: -1, PoolSize: 1, ReadTimeout: 30 * time.Second})
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer c.Close()
				var mine []call
				defer func() {
					l.mu.Lock()
					l.calls = append(l.calls, mine...)
					l.mu.Unlock()
				}()
				for !l.stopping.Load() {
					keys, args := next(r, i)
					cl := call{node: i, keys: keys, sent: time.Now().UnixNano()}
					// Every reply starts with limited, THROTTLE.ALL's too.
					v, err := c.Do(context.Background(), args...).Slice()
					cl.recv = time.Now().UnixNano()
					switch {
					case err == nil && len(v) == 0:
						err = fmt.Errorf("%v: empty reply", args)
						fallthrough
					case err != nil:
						cl.out, cl.err = failed, err
					case v[0] == int64(0):
						cl.out = admitted
					default:
						cl.out = limited
					}
					mine = append(mine, cl)
					if err != nil {
						return
					}
					l.replies[i].Add(1)
					time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond) // the clients' pace
				}
			}()
		}
	}
	return l
}

// stop stops the clients, waits for their calls in flight and returns
// every call made.
func (l *load) stop() []call {
	l.stopping.Store(true)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// waitReplies waits until the nodes have answered at least n more calls
// than before.
func (l *load) waitReplies(t *testing.T, nodes []int, n int64) {
	t.Helper()
	base := make([]int64, len(l.replies))
	for _, i := range nodes {
		base[i] = l.replies[i].Load()
	}
	testwait.For(t, 30*time.Second, fmt.Sprintf("%d more replies from nodes %v", n, nodes), func() bool {
		for _, i := range nodes {
			if l.replies[i].Load() < base[i]+n {
				return false
			}
		}
		return true
	})
}

// longestPause is the longest time between calls on key sent to the nodes
// of side from from to to.
func longestPause(calls []call, side []int, key string, from, to time.Time) time.Duration {
	last, most := from.UnixNano(), int64(0)
	var sent []int64
	for _, c := range calls {
		if slices.Contains(side, c.node) && slices.Contains(c.keys, key) && c.sent >= last && c.sent <= to.UnixNano() {
			sent = append(sent, c.sent)
		}
	}
	slices.Sort(sent)
	for _, t := range append(sent, to.UnixNano()) {
		most, last = max(most, t-last), t
	}
	return time.Duration(most)
}

// pttlWithin reports whether PTTL answered at an instant between pb and pa
// (Unix ns) on a key whose TAT is between tatLo and tatHi can be pttl. The
// key expires at the ms of its TAT: it is there while the ms of now is not
// past that, with PTTL the ms left, and gone (-2) after.
func pttlWithin(pttl, tatLo, tatHi, pb, pa int64) bool {
	expLo, expHi := tatLo/1e6, tatHi/1e6
	nowLo, nowHi := pb/1e6, pa/1e6
	if pttl == -2 {
		return expLo < nowHi
	}
	return expHi >= nowLo && pttl >= max(0, expLo-nowHi) && pttl <= expHi-nowLo
}

// debtBucket models one exact limiter charged with every admission, however
// many nodes decided them: a debt in units that drains rate units per ns
// and that each admission raises by cost units. It is the bucket behind
// CL.THROTTLE (cost T ns, rate 1: the TAT is the last admission's instant
// plus the debt then) and TB.THROTTLE (cost refill_period ns-units per
// token, rate refill_count), see reference/crdt-design.md 1.1.
type debtBucket struct{ cost, rate int64 }

// debt is the bucket's debt at now, after admissions at the instants at
// (sorted, none after now), fed in time order whatever the limit says:
// d <- max(0, d - rate*(t - t_prev)) + cost. The debt depends only on the
// set of instants (design 1.1), and it never decreases when an instant is
// moved later: unrolled, the debt is max over u of (sum of the costs at or
// after u) - rate*(now - u), and moving an admission later only adds it to
// more of those sums.
func (b debtBucket) debt(at []int64, now int64) int64 {
	var d, last int64
	for i, t := range at {
		if i > 0 {
			d = max(0, d-b.rate*(t-last))
		}
		d += b.cost
		last = t
	}
	if len(at) > 0 && now > last {
		d = max(0, d-b.rate*(now-last))
	}
	return d
}

// admissionsOf returns the send and the reply instants of the admitted
// calls on key (and of the failed ones with unknown), each sorted.
func admissionsOf(calls []call, key string, unknown bool) (sent, recv []int64) {
	for _, c := range calls {
		if slices.Contains(c.keys, key) && (c.out == admitted || unknown && c.out == failed) {
			sent, recv = append(sent, c.sent), append(recv, c.recv)
		}
	}
	slices.Sort(sent)
	slices.Sort(recv)
	return sent, recv
}

// gcraPeek is CL.THROTTLE's reply to a peek (quantity 0) at now on a key
// whose TAT is tat, from package gcra: what one exact GCRA would answer.
func gcraPeek(t *testing.T, p gcra.Params, tat, now int64) []int64 {
	t.Helper()
	_, _, res, err := gcra.Decide(tat, p, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return []int64{b2i(res.Limited), res.Limit, res.Remaining, gcra.Seconds(res.RetryAfter), gcra.Seconds(res.ResetAfter)}
}

// tbPeekMs is TB.THROTTLE's reply to a peek with MS on a bucket of
// capacity tokens of unit period ns refilling at rate owing d: the engine's
// arithmetic (engines/bucket.go check) for quantity 0, times rounded up to
// whole ms.
func tbPeekMs(capacity, unit, rate, d int64) []int64 {
	ms := func(ns int64) int64 {
		if ns < 0 {
			return -1
		}
		return ns/1e6 + min(ns%1e6, 1)
	}
	size := capacity * unit
	ceil := func(a, b int64) int64 { return (a + b - 1) / b }
	out := []int64{0, capacity, max(0, (size-d)/unit), -1, ms(ceil(d, rate))}
	if d > size {
		out[0], out[3] = 1, ms(ceil(d-size, rate))
	}
	return out
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// between reports whether every field of got lies between those of a and
// b (in either order): each field of a peek reply moves one way as the
// debt grows, so a reply for a debt between two debts lies between their
// replies.
func between(got, a, b []int64) bool {
	if len(got) != len(a) {
		return false
	}
	for i := range got {
		if got[i] < min(a[i], b[i]) || got[i] > max(a[i], b[i]) {
			return false
		}
	}
	return true
}

func int64s(t *testing.T, c *redis.Client, args ...any) []int64 {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Int64Slice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// debtKeys is the load of the partition tests and what one exact limiter
// makes of it: CL.THROTTLE g 4 4 1 (T = 250 ms, limit 5, tau = 1.25 s) and
// TB.THROTTLE b 5 4 1000 MS (5 tokens, 4 a second, replies in ms), which
// the model follows, and calls of every other kind, for convergence:
// THROTTLE.ALL (which charges g too), FWC and SWL with limits (an hour,
// 100000) that nothing reaches, so that they count every admission, SWC and
// LB.
type debtKeys struct {
	gp      gcra.Params
	tau     int64
	gModel  debtBucket
	tbModel debtBucket
	// peeks read every key in whole seconds, so that nodes read a few ms
	// apart agree.
	peeks [][]any
}

const (
	tbCap, tbUnit, tbRate = 5, int64(time.Second), 4
	bigLimit, hour        = 100_000, 3600
)

func newDebtKeys(t *testing.T) *debtKeys {
	gp, err := gcra.NewParams(4, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &debtKeys{
		gp: gp, tau: gp.Interval * gp.Limit(),
		gModel:  debtBucket{cost: gp.Interval, rate: 1},
		tbModel: debtBucket{cost: tbUnit, rate: tbRate},
		peeks: [][]any{{"CL.THROTTLE", "g", 4, 4, 1, 0}, {"TB.THROTTLE", "b", tbCap, tbRate, 1, 0},
			{"FWC.THROTTLE", "f", bigLimit, hour, 0}, {"SWL.THROTTLE", "s", bigLimit, hour, 0},
			{"SWC.THROTTLE", "w", bigLimit, hour, 0}, {"LB.THROTTLE", "l", 5, 4, 1, 0}},
	}
}

// next picks a call of the load.
func (k *debtKeys) next(r *rand.Rand, _ int) ([]string, []any) {
	switch n := r.IntN(20); {
	case n < 7:
		return []string{"g"}, []any{"CL.THROTTLE", "g", 4, 4, 1}
	case n < 14:
		return []string{"b"}, []any{"TB.THROTTLE", "b", tbCap, tbRate, 1000, 1, "MS"}
	case n < 16:
		return []string{"g", "f"}, []any{"THROTTLE.ALL", "LIMIT", "CL", "g", 4, 4, 1, "LIMIT", "FWC", "f", bigLimit, hour}
	case n < 17:
		return []string{"f"}, []any{"FWC.THROTTLE", "f", bigLimit, hour}
	case n < 18:
		return []string{"s"}, []any{"SWL.THROTTLE", "s", bigLimit, hour}
	case n < 19:
		return []string{"w"}, []any{"SWC.THROTTLE", "w", bigLimit, hour}
	default:
		return []string{"l"}, []any{"LB.THROTTLE", "l", 5, 4, 1}
	}
}

// prime fills g and b from one node and waits until every node sees it:
// otherwise the nodes would each take a whole burst at the start, a debt
// that would stop them all for most of a partition. The calls are
// admissions like the others: it returns them, one per unit.
func (k *debtKeys) prime(t *testing.T, m *mesh) []call {
	t.Helper()
	var primed []call
	for _, p := range []struct {
		key  string
		args []any
		qty  int
	}{
		{"g", []any{"CL.THROTTLE", "g", 4, 4, 1, k.gp.Limit()}, int(k.gp.Limit())},
		{"b", []any{"TB.THROTTLE", "b", tbCap, tbRate, 1000, tbCap, "MS"}, tbCap},
	} {
		sent := time.Now().UnixNano()
		if v := int64s(t, m.nodes[0].c, p.args...); v[0] != 0 {
			t.Fatalf("%v = %v on a new key, want admitted", p.args, v)
		}
		recv := time.Now().UnixNano()
		for range p.qty {
			primed = append(primed, call{node: 0, keys: []string{p.key}, sent: sent, recv: recv, out: admitted})
		}
	}
	m.waitAlike(10*time.Second, k.peeks)
	return primed
}

// model is what the model knows of the calls of a run: the admissions of
// g and b at their send and their reply instants.
type model struct {
	*debtKeys
	calls                  []call
	gSent, gRecv           []int64
	bSent, bRecv           []int64
	tatLo, tatHi, lastRecv int64
	failures               int
}

func (k *debtKeys) model(t *testing.T, calls []call) *model {
	t.Helper()
	md := &model{debtKeys: k, calls: calls}
	md.gSent, md.gRecv = admissionsOf(calls, "g", true)
	md.bSent, md.bRecv = admissionsOf(calls, "b", true)
	if len(md.gSent) == 0 || len(md.bSent) == 0 {
		t.Fatalf("nothing admitted: %d on g, %d on b", len(md.gSent), len(md.bSent))
	}
	// The TAT of g: the last admission plus the debt then.
	last := func(at []int64) int64 { return at[len(at)-1] }
	md.tatLo = last(md.gSent) + k.gModel.debt(md.gSent, last(md.gSent))
	md.tatHi = last(md.gRecv) + k.gModel.debt(md.gRecv, last(md.gRecv))
	md.lastRecv = max(last(md.gRecv), last(md.bRecv))
	return md
}

// check peeks g and b on node nd and checks the replies against the model;
// since is the instant the messages count from. It reports whether either
// key still refuses a call.
func (md *model) check(t *testing.T, nd *meshNode, since time.Time) (blocked bool) {
	t.Helper()
	pb := time.Now().UnixNano()
	g := int64s(t, nd.c, "CL.THROTTLE", "g", 4, 4, 1, 0)
	b := int64s(t, nd.c, "TB.THROTTLE", "b", tbCap, tbRate, 1000, 0, "MS")
	pttl := do(t, nd.c, "PTTL", "g").(int64)
	pa := time.Now().UnixNano()
	gLo, gHi := gcraPeek(t, md.gp, md.tatLo, pa), gcraPeek(t, md.gp, md.tatHi, pb)
	bLo := tbPeekMs(tbCap, tbUnit, tbRate, md.tbModel.debt(md.bSent, pa))
	bHi := tbPeekMs(tbCap, tbUnit, tbRate, md.tbModel.debt(md.bRecv, pb))
	pttlOK := pttlWithin(pttl, md.tatLo, md.tatHi, pb, pa)
	if md.failures < 10 && (!between(g, gLo, gHi) || !between(b, bLo, bHi) || !pttlOK) {
		md.failures++
		t.Errorf("node %s, %v after the end of the load: CL.THROTTLE g peek %v, want between %v and %v; PTTL g %d (ok: %v), want the TAT between %v and %v after the peek; TB.THROTTLE b peek (ms) %v, want between %v and %v",
			nd.id, time.Duration(pb-since.UnixNano()), g, gLo, gHi, pttl, pttlOK, time.Duration(md.tatLo-pa), time.Duration(md.tatHi-pb), b, bLo, bHi)
	}
	return g[2] == 0 || b[2] == 0
}

// checkCounts checks that FWC and SWL count every admission of the run on
// every node (FWC unless its hour-long window turned during the run).
func (md *model) checkCounts(t *testing.T, m *mesh) {
	t.Helper()
	first := slices.MinFunc(md.calls, func(a, b call) int { return cmp.Compare(a.sent, b.sent) }).sent
	for _, p := range [][]any{md.peeks[2], md.peeks[3]} {
		key := p[1].(string)
		if key == "f" && first/(hour*1e9) != md.lastRecv/(hour*1e9) {
			t.Logf("FWC's window turned during the run: its count is not checked")
			continue
		}
		sent, _ := admissionsOf(md.calls, key, false)
		for _, nd := range m.nodes {
			if got := bigLimit - int64s(t, nd.c, p...)[2]; got != int64(len(sent)) {
				t.Errorf("node %s: %v says %d admitted, want the %d admissions acknowledged", nd.id, p, got, len(sent))
			}
		}
	}
}

// waitRepaid peeks every node until g and b take a call again there,
// checking every reply against the model: every node stays limited until
// the whole debt, every side's admissions included, is repaid, and not
// longer. It returns the instant the last node took calls again.
func (md *model) waitRepaid(t *testing.T, m *mesh, since time.Time) time.Time {
	t.Helper()
	// The model's last instant of refusal: when D_hi has drained to
	// size - cost.
	repaid := max(md.tatHi-(md.tau-md.gp.Interval),
		md.lastRecv+(md.tbModel.debt(md.bRecv, md.lastRecv)-(tbCap-1)*tbUnit)/tbRate)
	deadline := time.Unix(0, repaid).Add(5 * time.Second)
	pending := []int{0, 1, 2}
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nodes %v still limited 5 s after the model repaid the debt", pending)
		}
		pending = slices.DeleteFunc(pending, func(i int) bool { return !md.check(t, m.nodes[i], since) })
		time.Sleep(time.Millisecond) // polling
	}
	return time.Now()
}

// tally logs what the calls of a run got, and fails the test on a call
// that failed (nothing was killed).
func tally(t *testing.T, m *mesh, calls []call) {
	t.Helper()
	var ok, lim int
	for _, c := range calls {
		switch c.out {
		case admitted:
			ok++
		case limited:
			lim++
		case failed:
			t.Errorf("node %s: a call on %v failed: %v", m.nodes[c.node].id, c.keys, c.err)
		}
	}
	t.Logf("%d calls: %d admitted, %d limited", len(calls), ok, lim)
}

// TestCrdt_Partition: three nodes, clients on both sides of a two-second
// partition {x} | {y, z} (x seeded) calling CL.THROTTLE, TB.THROTTLE and
// the other kinds on the same keys (debtKeys), every reply recorded. After
// the heal and the end of the load, every node must show the same DEBUG
// DIGEST and the same peeks within 1 s, and what they show must be what one
// exact limiter charged with every recorded admission would show: nothing
// admitted on either side is lost, and nothing is charged that was not
// admitted.
//
// How the comparison copes with real time. The test and the nodes read the
// same wall clock (one machine), so a node stamped each admission at an
// instant between the call's send and reply instants, and answers a peek at
// an instant between the instants around it. The model's debt never
// decreases when an admission moves later, and never increases as the peek
// moves later; so the node's true debt at its peek lies between
//
//	D_lo = debt(admissions at their send instants, at the instant after the peek)
//	D_hi = debt(admissions at their reply instants, at the instant before it)
//
// and, since every field of a peek reply is monotone in the debt (limited,
// retry_after and reset_after grow with it, remaining shrinks), each field
// must lie between its values for D_lo and D_hi. That is an exact check: no
// tolerance but the measured round trips, which are small next to the cost
// of one admission (250 ms of GCRA debt; TB replies in ms with MS), so one
// admission lost or invented shows. CL.THROTTLE answers in whole seconds;
// the key's PTTL (ms), which a mesh node sets to the instant the merged
// debt is repaid, checks the same TAT to the millisecond. The peeks then
// go on until the keys take a call again (waitRepaid). FWC and SWL must
// count every admission.
func TestCrdt_Partition(t *testing.T) {
	rng := newRand(t)
	m := newMesh(t, 3, false)
	took := m.waitLinks(20*time.Second, "the mesh connected", allLinks)
	t.Logf("mesh connected %v after the last start", took)
	keys := newDebtKeys(t)

	alone := rng.IntN(3)
	var others []int
	for i := range 3 {
		if i != alone {
			others = append(others, i)
		}
	}
	warmup := time.Duration(300+rng.IntN(500)) * time.Millisecond
	after := time.Duration(rng.IntN(300)) * time.Millisecond
	t.Logf("partition {%s} | {%s, %s}; load %v before it, %v after the heal",
		m.nodes[alone].id, m.nodes[others[0]].id, m.nodes[others[1]].id, warmup, after)

	primed := keys.prime(t, m)
	l := m.startLoad(rng, []int{0, 1, 2}, 2, keys.next)
	time.Sleep(warmup) // a load phase, not a wait for something to settle
	cutAt := time.Now()
	m.isolate(alone)
	cutSeen := m.waitLinks(5*time.Second, "the partition seen", func(i, j int) bool { return (i == alone) == (j == alone) })
	t.Logf("partition seen on every node %v after the cut", cutSeen)
	time.Sleep(2*time.Second - time.Since(cutAt)) // the partition lasts 2 s
	m.heal()
	healAt := time.Now()
	time.Sleep(after) // load after the heal
	calls := append(l.stop(), primed...)
	endAt := time.Now()
	convergedAt := m.waitAlike(10*time.Second, keys.peeks)
	t.Logf("converged %v after the end of the load (%v after the heal)", convergedAt.Sub(endAt), convergedAt.Sub(healAt))
	if d := convergedAt.Sub(endAt); d > time.Second {
		t.Errorf("converged %v after the end of the load, want within 1 s", d)
	}

	tally(t, m, calls)
	var during [3]int
	for _, c := range calls {
		if c.out == admitted && slices.Contains(c.keys, "g") && c.sent > cutAt.UnixNano() && c.recv < healAt.UnixNano() {
			during[c.node]++
		}
	}
	t.Logf("CL.THROTTLE g admitted during the partition per node: %v", during)
	// A side whose clients all paused for longer than a key's bucket would
	// see its debt repaid in the partition (TestCrdt_ExpiryInPartition).
	for _, side := range [][]int{{alone}, others} {
		for _, key := range []string{"g", "b"} {
			t.Logf("side %v, key %s: longest pause between calls in the partition %v", side, key, longestPause(calls, side, key, cutAt, healAt))
		}
	}
	md := keys.model(t, calls)
	if d := keys.gModel.debt(md.gSent, endAt.UnixNano()); d <= keys.tau+keys.gp.Interval {
		t.Errorf("the debt of g at the end of the load is %v, not beyond its %v bucket: the partition did not make the sides over-admit, so repayment is not tested",
			time.Duration(d), time.Duration(keys.tau))
	}
	for _, nd := range m.nodes {
		md.check(t, nd, endAt)
	}
	md.checkCounts(t, m)
	repaidAt := md.waitRepaid(t, m, endAt)
	t.Logf("every node took calls again %v after the heal", repaidAt.Sub(healAt))
}

// TestCrdt_LinkChaos: as TestCrdt_Partition, but instead of one clean
// partition, single directed links (a node's batches to one peer) are cut
// and healed at random (seeded) for four seconds while every node takes
// load, so that links come back one way before the other, full syncs cross
// deltas, and watermarks arrive from some peers and not others. The keys
// are not primed: the load starts on new keys at every node at once, each
// taking a whole burst before it hears of the others'. After the heal and
// the end of the load every node must converge within 1 s on what one
// exact limiter charged with every admission shows.
func TestCrdt_LinkChaos(t *testing.T) {
	rng := newRand(t)
	m := newMesh(t, 3, false)
	m.waitLinks(20*time.Second, "the mesh connected", allLinks)
	keys := newDebtKeys(t)
	l := m.startLoad(rng, []int{0, 1, 2}, 2, keys.next)
	flaps := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); flaps++ {
		i := rng.IntN(3)
		j := (i + 1 + rng.IntN(2)) % 3
		if p := m.proxy[i][j]; p.Blocked() {
			p.Heal()
		} else {
			p.Block()
		}
		time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond) // the chaos' pace
	}
	m.heal()
	healAt := time.Now()
	calls := l.stop()
	endAt := time.Now()
	convergedAt := m.waitAlike(10*time.Second, keys.peeks)
	t.Logf("%d flaps; converged %v after the end of the load", flaps, convergedAt.Sub(endAt))
	if d := convergedAt.Sub(endAt); d > time.Second {
		t.Errorf("converged %v after the end of the load, want within 1 s", d)
	}
	tally(t, m, calls)
	md := keys.model(t, calls)
	for _, nd := range m.nodes {
		md.check(t, nd, endAt)
	}
	md.checkCounts(t, m)
	repaidAt := md.waitRepaid(t, m, endAt)
	t.Logf("every node took calls again %v after the heal", repaidAt.Sub(healAt))
}

// TestCrdt_KillRestart: while clients call CL.THROTTLE on every node, one
// node (seeded) is killed with SIGKILL; the other two go on taking load,
// then it is restarted, (a) on its data folder and then (b, with the node
// picked again) on an empty one. The load stops once the restarted node answers
// PING, and all three must show the same DEBUG DIGEST and peeks within 1 s
// of that PING.
//
// The limits (max_burst 999999, one per hour) admit every call and drain
// nothing during the test, so a peek's remaining counts exactly the units
// admitted on the key: consumed = limit - remaining. For every key and node
// it must lie between the admissions acknowledged and those plus the calls
// with an unknown outcome (in flight when their node died): nothing
// acknowledged is lost, nothing unasked is charged. The nodes run with
// --appendfsync always, so that what a node acknowledged is on its disk:
// (a) checks, before the restarted node may reach its peers, that it
// still charges its own admissions from before the kill (on a key only it
// took), then that every node does; and that its crdt_incarnation changed.
// With (b) the node's own admissions live only in what it had shipped:
// those acknowledged within the last 250 ms before the kill may be lost
// (the design allows one sync interval), none earlier.
func TestCrdt_KillRestart(t *testing.T) {
	rng := newRand(t)
	m := newMesh(t, 3, false, "--appendfsync", "always")
	m.waitLinks(20*time.Second, "the mesh connected", allLinks)
	const burst, keys = 999_999, 4
	limit := int64(burst + 1)
	throttle := func(key string, qty int) []any { return []any{"CL.THROTTLE", key, burst, 1, 3600, qty} }
	var calls []call
	all := []int{0, 1, 2}
	for round, empty := range []bool{false, true} {
		victim := rng.IntN(3)
		vn := m.nodes[victim]
		solo := fmt.Sprintf("solo%d", round)
		var survivors []int
		for i := range 3 {
			if i != victim {
				survivors = append(survivors, i)
			}
		}
		what := map[bool]string{false: "its data folder", true: "an empty folder"}[empty]
		t.Logf("round %d: kill -9 node %s, restart it on %s", round, vn.id, what)
		l := m.startLoad(rng, all, 2, func(r *rand.Rand, node int) ([]string, []any) {
			if node == victim && r.IntN(4) == 0 {
				return []string{solo}, throttle(solo, 1)
			}
			k := fmt.Sprintf("k%d", r.IntN(keys))
			return []string{k}, throttle(k, 1)
		})
		l.waitReplies(t, all, 300)
		inc := infoField(t, vn.c, "replication", "crdt_incarnation")
		killAt := time.Now().UnixNano()
		vn.srv.Kill()
		l.waitReplies(t, survivors, 300+int64(rng.IntN(1000)))
		if empty {
			vn.dir = t.TempDir()
		} else {
			m.isolate(victim)
		}
		m.start(victim)
		these := l.stop()
		calls = append(calls, these...)
		if got := infoField(t, vn.c, "replication", "crdt_incarnation"); got == inc {
			t.Errorf("round %d: crdt_incarnation of node %s is %s after the restart, as before", round, vn.id, got)
		}
		soloAcked, _ := admissionsOf(these, solo, false)
		soloAll, _ := admissionsOf(these, solo, true)
		acked, unknown := int64(len(soloAcked)), int64(len(soloAll)-len(soloAcked))
		if !empty {
			// Still cut off from its peers: what it charges is its own.
			v := int64s(t, vn.c, throttle(solo, 0)...)
			if got := limit - v[2]; got < acked || got > acked+unknown {
				t.Errorf("round %d: restarted node %s on its folder, alone: %s consumed %d, want %d acknowledged (+ up to %d unknown)",
					round, vn.id, solo, got, acked, unknown)
			}
			m.heal()
		}
		peeks := [][]any{throttle(solo, 0)}
		for k := range keys {
			peeks = append(peeks, throttle(fmt.Sprintf("k%d", k), 0))
		}
		convergedAt := m.waitAlike(10*time.Second, peeks)
		t.Logf("round %d: converged %v after node %s first answered PING", round, convergedAt.Sub(vn.readyAt), vn.id)
		if d := convergedAt.Sub(vn.readyAt); d > time.Second {
			t.Errorf("round %d: converged %v after the restarted node first answered PING, want within 1 s", round, d)
		}

		// Every key on every node, over both rounds.
		for _, p := range peeks {
			key := p[1].(string)
			var acked, unknown, mayLose int64
			for _, c := range calls {
				if !slices.Contains(c.keys, key) {
					continue
				}
				switch c.out {
				case admitted:
					acked++
					if empty && c.node == victim && c.recv >= killAt-int64(250*time.Millisecond) && c.recv <= killAt {
						mayLose++
					}
				case failed:
					unknown++
				}
			}
			for _, nd := range m.nodes {
				v := int64s(t, nd.c, p...)
				got := limit - v[2]
				if got < acked-mayLose || got > acked+unknown {
					t.Errorf("round %d: node %s: %s consumed %d; %d acknowledged (%d of them may be lost), %d unknown",
						round, nd.id, key, got, acked, mayLose, unknown)
				}
				if nd == m.nodes[0] {
					t.Logf("round %d: %s consumed %d: %d acknowledged, %d unknown", round, key, got, acked, unknown)
				}
			}
		}
	}
}

// clockMesh starts three nodes on the debug clock with --crdt-max-skew
// 100ms and extra arguments, every link blocked, and sets every clock to
// one instant: the clocks freeze at each process's start, which are
// further apart than that. It returns the mesh and the instant.
func clockMesh(t *testing.T, extra ...string) (*mesh, int64) {
	t.Helper()
	m := newMesh(t, 3, true, append([]string{"--debug-clock", "--crdt-max-skew", "100ms"}, extra...)...)
	base := time.Now().Truncate(time.Millisecond).UnixNano()
	for _, nd := range m.nodes {
		do(t, nd.c, "DEBUG", "CLOCK", "SET", base)
	}
	return m, base
}

// skewLogged waits until node i's log says it refused node j for a clock
// off by want (as time.Duration prints it), and returns the line.
func (m *mesh) skewLogged(i, j int, want string) string {
	m.t.Helper()
	var line string
	testwait.For(m.t, 10*time.Second, fmt.Sprintf("node %s logging that %s's clock is %s off", m.nodes[i].id, m.nodes[j].id, want), func() bool {
		for l := range strings.SplitSeq(m.nodes[i].srv.Output(), "\n") {
			if strings.Contains(l, "crdt="+m.nodes[i].id+" ") && strings.Contains(l, "peer="+m.nodes[j].id+" ") &&
				strings.Contains(l, "its clock is "+want+" off ours, more than --crdt-max-skew 100ms") {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

// TestCrdt_SkewRefused: a node whose clock is 1 s off the others' (with
// --crdt-max-skew 100ms) is refused when the links come up: CRDT PEERS
// and INFO show it not connected on every node, while the other two
// connect; each side's log says why. Once its clock is set back, it
// connects.
func TestCrdt_SkewRefused(t *testing.T) {
	rng := newRand(t)
	m, base := clockMesh(t)
	off := rng.IntN(3)
	do(t, m.nodes[off].c, "DEBUG", "CLOCK", "SET", base+int64(time.Second))
	t.Logf("node %s is 1 s ahead", m.nodes[off].id)
	m.heal()
	apart := func(i, j int) bool { return i != off && j != off }
	for i := range m.nodes {
		if i == off {
			continue
		}
		// Both ends dial, and each refuses the other's clock.
		t.Log(m.skewLogged(i, off, "1s"))
		t.Log(m.skewLogged(off, i, "-1s"))
	}
	m.waitLinks(10*time.Second, "the other two connected, the skewed one not", apart)
	// Refused for good: it stays apart while the dialers retry, for a few
	// of their longest backoffs (200 ms).
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if ok, seen := m.linksAre([]int{0, 1, 2}, apart); !ok {
			t.Fatalf("the skewed node connected: %s", seen)
		}
	}
	for i, nd := range m.nodes {
		if i == off {
			continue
		}
		if got := infoField(t, nd.c, "replication", "crdt_peer_"+m.nodes[off].id); !strings.Contains(got, "connected=0") {
			t.Errorf("node %s INFO crdt_peer_%s:%s, want connected=0", nd.id, m.nodes[off].id, got)
		}
	}
	do(t, m.nodes[off].c, "DEBUG", "CLOCK", "SET", base)
	took := m.waitLinks(10*time.Second, "every node connected once the clock is back", allLinks)
	t.Logf("connected %v after the clock was set back", took)
}

// TestCrdt_SkewAfterConnect: the clock of a node already connected jumps
// 1 s ahead (with --crdt-max-skew 100ms): its peers must stop exchanging
// with it, as with a node refused at connection (TestCrdt_SkewRefused),
// and take it back once its clock is set back.
func TestCrdt_SkewAfterConnect(t *testing.T) {
	rng := newRand(t)
	m, base := clockMesh(t)
	m.heal()
	m.waitLinks(10*time.Second, "the mesh connected", allLinks)
	off := rng.IntN(3)
	do(t, m.nodes[off].c, "DEBUG", "CLOCK", "SET", base+int64(time.Second))
	t.Logf("node %s is now 1 s ahead", m.nodes[off].id)
	took := m.waitLinks(5*time.Second, "the skewed node cut off", func(i, j int) bool { return i != off && j != off })
	t.Logf("cut off %v after its clock jumped", took)
	do(t, m.nodes[off].c, "DEBUG", "CLOCK", "SET", base)
	m.waitLinks(10*time.Second, "every node connected once the clock is back", allLinks)
}

// setClocks sets the debug clock of every node to at.
func (m *mesh) setClocks(at int64) {
	m.t.Helper()
	for _, nd := range m.nodes {
		do(m.t, nd.c, "DEBUG", "CLOCK", "SET", at)
	}
}

// waitSame waits until every node answers DEBUG DIGEST alike.
func (m *mesh) waitSame(within time.Duration) { m.t.Helper(); m.waitAlike(within, nil) }

// TestCrdt_ExpiryInPartition: a node must not drop a key whose debt it
// sees repaid while a partition hides the other side's admissions: in the
// union of both sides its admissions still count. On the debug clock, with
// CL.THROTTLE k 0 1 10 (one call per 10 s): node x (cut off) admits one at
// base, node y on the other side one at base+5s, and every clock moves to
// base+12s, when x alone would be repaid (base+10s). One exact limiter fed
// both admissions has its TAT at max(base + 10 + 10, base+5 + 10) =
// base+20s, a debt of 8 s at base+12s; without x's admission it would be
// base+15s, 3 s. After the heal every node must show 8 s (the design's
// rule: a key expires when its debt at the completeness bound is 0, and
// the bound does not move in a partition).
func TestCrdt_ExpiryInPartition(t *testing.T) {
	rng := newRand(t)
	m, base := clockMesh(t)
	m.heal()
	m.waitLinks(10*time.Second, "the mesh connected", allLinks)
	x := rng.IntN(3)
	y := (x + 1 + rng.IntN(2)) % 3
	t.Logf("node %s cut off from the others; node %s admits on the other side", m.nodes[x].id, m.nodes[y].id)
	m.isolate(x)
	m.waitLinks(10*time.Second, "the partition seen", func(i, j int) bool { return (i == x) == (j == x) })
	call := []any{"CL.THROTTLE", "k", 0, 1, 10, 1}
	if v := int64s(t, m.nodes[x].c, call...); v[0] != 0 {
		t.Fatalf("node %s: %v = %v, want admitted", m.nodes[x].id, call, v)
	}
	do(t, m.nodes[y].c, "DEBUG", "CLOCK", "SET", base+int64(5*time.Second))
	if v := int64s(t, m.nodes[y].c, call...); v[0] != 0 {
		t.Fatalf("node %s: %v = %v, want admitted (it has not seen node %s's)", m.nodes[y].id, call, v, m.nodes[x].id)
	}
	m.setClocks(base + int64(12*time.Second))
	t.Logf("at base+12s before the heal, node %s has k: %v; node %s: %v", m.nodes[x].id, do(t, m.nodes[x].c, "EXISTS", "k"),
		m.nodes[y].id, do(t, m.nodes[y].c, "EXISTS", "k"))
	m.heal()
	m.waitLinks(10*time.Second, "the mesh connected again", allLinks)
	m.waitSame(10 * time.Second)
	want := []int64{0, 1, 0, -1, 8}
	for _, nd := range m.nodes {
		if got := int64s(t, nd.c, "CL.THROTTLE", "k", 0, 1, 10, 0); !slices.Equal(got, want) {
			t.Errorf("node %s: peek %v, want %v (reset_after 3 means node %s's admission was lost)", nd.id, got, want, m.nodes[x].id)
		}
	}
}

// TestCrdt_RestartOnFolderConverges: a node restarted on its data folder
// holds the debt logs it loaded as they were, unfolded, and a write after
// the restart brings every node to the same bytes (DEBUG DIGEST), not only
// the same replies. On the debug clock: node x admits on a key at base,
// all three hold that event unfolded (the clocks stand still, so no
// watermark passes it), x is killed with SIGKILL and restarted on its
// folder, the clocks move on a second, and another node admits on the key,
// folding the first event once its completeness bound has passed it.
func TestCrdt_RestartOnFolderConverges(t *testing.T) {
	rng := newRand(t)
	m, base := clockMesh(t, "--appendfsync", "always")
	m.heal()
	m.waitLinks(10*time.Second, "the mesh connected", allLinks)
	x := rng.IntN(3)
	do(t, m.nodes[x].c, "CL.THROTTLE", "k", 9, 1, 60, 3)
	m.waitSame(10 * time.Second)
	m.isolate(x)
	m.nodes[x].srv.Kill()
	m.start(x)
	// Its clock starts at the wall clock, far from base: set it before it
	// may reach its peers.
	do(t, m.nodes[x].c, "DEBUG", "CLOCK", "SET", base)
	m.heal()
	m.waitLinks(10*time.Second, "the mesh connected again", allLinks)
	m.waitSame(10 * time.Second)
	m.setClocks(base + int64(time.Second))
	y := (x + 1 + rng.IntN(2)) % 3
	do(t, m.nodes[y].c, "CL.THROTTLE", "k", 9, 1, 60, 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, seen := m.alike([][]any{{"DEBUG", "DIGEST-VALUE", "k"}, {"CL.THROTTLE", "k", 9, 1, 60, 0}})
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s, restarted on its folder, never matches its peers' bytes after node %s wrote (DEBUG DIGEST, DIGEST-VALUE k, peek):%s", m.nodes[x].id, m.nodes[y].id, seen)
		}
		time.Sleep(time.Millisecond) // polling
	}
}
