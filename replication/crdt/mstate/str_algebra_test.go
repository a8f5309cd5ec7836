package mstate

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
)

// strHistory: a few nodes, their clocks skewed by whole grid steps (so that
// stamps of different origins collide), run random SET (plain, with a TTL,
// KEEPTTL), INCRBY/DECRBY, DEL, EXPIRE and PERSIST on their own copies of a
// key, and merge each other's states now and then, stale ones included.
// Every state a write produced is an atom.
//
// The oracle says what the join of everything must be, from the log of the
// writes rather than from the join: the greatest register written; on it,
// each origin's counter is the sum of the increments (and of the
// decrements) it made on that register, and the expiry the greatest
// version written; reads follow.
func strHistory(rng *rand.Rand) *history {
	h := newHistory(Str)
	type node struct {
		o     Origin
		state []byte
		skew  int64
	}
	grid := []int64{100 * ms, 500 * ms, s}[rng.IntN(3)]
	spread := 1 + rng.Int64N(3) // distinct skews: 1 makes concurrent stamps tie
	var nodes []*node
	for _, o := range origins(rng, 2+rng.IntN(3)) {
		o.Node++ // the zero origin is reserved
		nodes = append(nodes, &node{o: o, skew: grid * rng.Int64N(spread)})
	}
	// A profile: how often each command runs (deliver, SET, INCRBY, DEL,
	// EXPIRE, PERSIST), so that some histories are mostly concurrent
	// writes, others mostly TTL changes.
	var weights [6]int
	total := 0
	for i := range weights {
		weights[i] = 1 + rng.IntN(10)
		total += weights[i]
	}
	pick := func() int {
		x := rng.IntN(total)
		for i, w := range weights {
			if x < w {
				return i
			}
			x -= w
		}
		panic("unreachable")
	}
	type increment struct {
		r     reg
		o     Origin
		delta int64
	}
	var incs []increment
	clock := t0 + rng.Int64N(1000)*s
	last := clock
	// After the main run comes a tail of increments and TTL changes on the
	// settled register (no SET or DEL), with expiries that mostly shorten,
	// so that its expiry goes through several epochs. Half the time a race
	// comes first: the nodes catch up with each other, then all write at
	// one instant, so that the greatest stamps tie.
	steps := 10 + rng.IntN(80)
	tail := steps + 5 + rng.IntN(20)
	for step := 0; step < tail || len(h.atoms) == 0; step++ {
		if step == steps && rng.IntN(2) == 0 {
			for _, n := range nodes {
				for _, m := range nodes {
					n.state = must(Merge(n.state, m.state))
				}
			}
			clock += grid
			for _, n := range nodes {
				v := []byte(strconv.Itoa(rng.IntN(3)))
				next, err := StrSet(n.state, n.o, clock+n.skew, v, 0, false)
				if rng.IntN(3) == 0 {
					next, _, err = StrDel(n.state, n.o, clock+n.skew)
				}
				if err != nil {
					panic(err)
				}
				if string(next) != string(n.state) {
					n.state = next
					h.add(int64(step), next)
				}
			}
		}
		if step == steps {
			weights[1], weights[3] = 0, 0
			weights[4] += 10
			total = 0
			for _, w := range weights {
				total += w
			}
		}
		clock += grid * rng.Int64N(3)
		n := nodes[rng.IntN(len(nodes))]
		now := clock + n.skew
		last = max(last, now)
		nowMs := now / ms
		var next []byte
		var err error
		written := true
		switch pick() {
		case 0: // a delivery: another node's copy, or a stale state
			if len(h.atoms) > 0 && rng.IntN(2) == 0 {
				n.state, err = Merge(n.state, h.atoms[rng.IntN(len(h.atoms))].state)
			} else {
				n.state, err = Merge(n.state, nodes[rng.IntN(len(nodes))].state)
			}
			if err != nil {
				panic(err)
			}
			continue
		case 1:
			v := strconv.Itoa(rng.IntN(20))
			if rng.IntN(5) == 0 {
				v = "abc"
			}
			var exp int64
			keep := rng.IntN(6) == 0
			if !keep && rng.IntN(4) == 0 {
				exp = nowMs + (rng.Int64N(10)-1)*grid/ms
			}
			next, err = StrSet(n.state, n.o, now, []byte(v), exp, keep)
		case 2:
			delta := rng.Int64N(9) - 3
			if rng.IntN(15) == 0 {
				delta = math.MaxInt64/2 + rng.Int64N(math.MaxInt64/2)
				if rng.IntN(2) == 0 {
					delta = -delta
				}
			}
			if next, _, err = StrIncr(n.state, n.o, now, delta); err == nil {
				d, _ := decodeStr(next)
				if written = string(next) != string(n.state); written {
					incs = append(incs, increment{d.r, n.o, delta})
				}
			}
		case 3:
			next, written, err = StrDel(n.state, n.o, now)
		case 4:
			at := nowMs + (rng.Int64N(40)-1)*grid/ms
			if step >= steps { // later, shorter: the tail's shortenings
				at = nowMs + (int64(tail-step)*2+rng.Int64N(2))*grid/ms
			}
			next, written, err = StrExpire(n.state, n.o, now, at)
		default:
			next, written, err = StrExpire(n.state, n.o, now, Persist)
		}
		if err != nil || !written {
			continue // an overflow, a value that is not an integer, a missing key
		}
		n.state = next
		h.add(int64(step), next)
	}
	probes := []int64{last, last + 3*grid, last + 20*grid}
	h.oracle = func(merged []byte) string {
		var win strState
		for i, a := range h.atoms {
			d, _ := decodeStr(a.state)
			if i == 0 || d.r.compare(win.r) > 0 {
				win = d
			}
		}
		for _, a := range h.atoms {
			if d, _ := decodeStr(a.state); d.r.compare(win.r) == 0 && d.e.compare(win.e) > 0 {
				win.e = d.e
			}
		}
		var want []counter
		total := new(big.Int)
		if !win.r.deleted {
			total.SetString(string(win.r.value), 10)
		}
		for _, inc := range incs {
			if inc.r.compare(win.r) != 0 {
				continue
			}
			i, found := slices.BinarySearchFunc(want, inc.o, func(c counter, o Origin) int { return c.o.Compare(o) })
			if !found {
				want = slices.Insert(want, i, counter{o: inc.o})
			}
			if inc.delta >= 0 {
				want[i].p += uint64(inc.delta)
			} else {
				want[i].n += uint64(-inc.delta)
			}
			total.Add(total, big.NewInt(inc.delta))
		}
		got, err := decodeStr(merged)
		switch {
		case err != nil:
			return fmt.Sprintf("the merge does not decode: %v", err)
		case got.r.compare(win.r) != 0:
			return fmt.Sprintf("register %+v, want the greatest written, %+v", got.r, win.r)
		case got.e != win.e:
			return fmt.Sprintf("expiry %+v, want the greatest written on the register, %+v", got.e, win.e)
		case !slices.Equal(got.c, want):
			return fmt.Sprintf("counters %+v, want the sums of each origin's increments on the register, %+v", got.c, want)
		}
		for _, at := range probes {
			v, err := StrGet(merged, at)
			live := (!win.r.deleted || len(want) > 0) &&
				(win.e.ms == 0 || win.e.ms == Persist || at/ms <= win.e.ms)
			switch {
			case !live:
				if err != nil || v.Exists {
					return fmt.Sprintf("at %d: got %+v, %v; want missing", at, v, err)
				}
			case len(want) == 0:
				if err != nil || !v.Exists || string(v.Bytes) != string(win.r.value) {
					return fmt.Sprintf("at %d: got %+v, %v; want %q", at, v, err, win.r.value)
				}
			case !total.IsInt64():
				if err == nil {
					return fmt.Sprintf("at %d: got %+v; want an overflow, the sum is %v", at, v, total)
				}
			case err != nil || !v.Exists || v.Int != total.Int64():
				return fmt.Sprintf("at %d: got %+v, %v; want %v", at, v, err, total)
			}
		}
		return ""
	}
	return h
}

// strMutant is a merge of string states with another join.
func strMutant(name string, join func(a, b *strState) *strState) ops {
	return ops{name: name, fold: realOps.fold, merge: func(a, b []byte) ([]byte, error) {
		x, err := decodeStr(a)
		if err != nil {
			return nil, err
		}
		y, err := decodeStr(b)
		if err != nil {
			return nil, err
		}
		return join(&x, &y).encode()
	}}
}

// realJoin is the join under test.
func realJoin(a, b *strState) *strState { return a.join(b).(*strState) }

var strMutants = []ops{
	// The counts of one register's copies added instead of the larger
	// taken: a duplicated delivery counts twice.
	strMutant("sum counters", func(a, b *strState) *strState {
		m := realJoin(a, b)
		if a.r.compare(b.r) == 0 {
			m.c = union(nil, a.c, b.c, compareCounter, func(x, y counter) counter {
				return counter{o: x.o, p: x.p + y.p, n: x.n + y.n}
			}, func(counter) bool { return true })
		}
		return m
	}),
	// The losing register's counters kept: increments made on a value a
	// later SET or DEL replaced come back.
	strMutant("keep a losing register's counters", func(a, b *strState) *strState {
		m := *realJoin(a, b)
		m.c = union(nil, a.c, b.c, compareCounter, counter.join, func(counter) bool { return true })
		return &m
	}),
	// Expiries merged by the later time alone: a shortening loses to the
	// longer TTL it replaced.
	strMutant("longest expiry regardless of epoch", func(a, b *strState) *strState {
		m := *realJoin(a, b)
		if a.r.compare(b.r) == 0 {
			m.e = expiry{epoch: max(a.e.epoch, b.e.epoch), ms: max(a.e.ms, b.e.ms)}
		}
		return &m
	}),
	// Registers ordered by stamp alone, ties to the left side.
	strMutant("registers by stamp alone", func(a, b *strState) *strState {
		if b.r.stamp > a.r.stamp {
			return b
		}
		if b.r.stamp < a.r.stamp || a.r.compare(b.r) != 0 {
			return a
		}
		return realJoin(a, b)
	}),
	// A value beats any tombstone: deleted values come back.
	strMutant("values beat tombstones", func(a, b *strState) *strState {
		if c := cmp.Compare(b2i(!a.r.deleted), b2i(!b.r.deleted)); c != 0 {
			if c > 0 {
				return a
			}
			return b
		}
		return realJoin(a, b)
	}),
}
