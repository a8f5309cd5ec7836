package mstate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/store"
)

// redisString is Redis' semantics of one string key, as the single-node
// commands and store implement them: a value and an expiry (Unix ms, 0 for
// none), the key there through its expiry millisecond. Whether it has
// expired is a function of the time alone: reading or deleting an expired
// key does not remove it, as Redis' lazy expiry does. The two agree while
// time does not go back; a stale now (which the runs include) sees the key
// as a string state does, live again before its expiry.
type redisString struct {
	exists bool
	val    []byte
	exp    int64
}

func (m *redisString) alive(nowMs int64) bool { return m.exists && !store.Expired(m.exp, nowMs) }

func (m *redisString) get(nowMs int64) read {
	if !m.alive(nowMs) {
		return missing
	}
	return read{string(m.val), m.exp}
}

// set is SET with PXAT exp (0 for none) or KEEPTTL.
func (m *redisString) set(nowMs int64, v []byte, exp int64, keep bool) {
	switch {
	case store.Expired(exp, nowMs):
		*m = redisString{}
	case keep:
		if !m.alive(nowMs) {
			m.exp = 0
		}
		m.exists, m.val = true, v
	default:
		*m = redisString{exists: true, val: v, exp: exp}
	}
}

func (m *redisString) incr(nowMs, d int64) (int64, error) {
	var cur int64
	if m.alive(nowMs) {
		var ok bool
		if cur, ok = store.ParseInt(m.val); !ok {
			return 0, ErrNotInteger
		}
	} else {
		*m = redisString{}
	}
	if (d > 0 && cur > math.MaxInt64-d) || (d < 0 && cur < math.MinInt64-d) {
		return 0, engines.ErrOverflow
	}
	m.exists, m.val = true, strconv.AppendInt(nil, cur+d, 10)
	return cur + d, nil
}

func (m *redisString) del(nowMs int64) bool {
	if !m.alive(nowMs) {
		return false
	}
	*m = redisString{}
	return true
}

// expire is PEXPIREAT when, or PERSIST for Persist.
func (m *redisString) expire(nowMs, when int64) bool {
	switch {
	case !m.alive(nowMs):
		return false
	case when == Persist:
		if m.exp == 0 {
			return false
		}
		m.exp = 0
	case when <= nowMs:
		*m = redisString{}
	default:
		m.exp = when
	}
	return true
}

// One writer's string state answers as Redis does, step by step, on random
// timelines of SET (plain, PXAT past and future, KEEPTTL), INCRBY/DECRBY
// (near the limits of int64 too), DEL, PEXPIREAT and PERSIST, with stale
// and repeated instants and keys that expire. Every write absorbs every
// earlier state of the run (it is an inflation), and no call modifies its
// input.
func TestStrOneWriter(t *testing.T) {
	rng := newRand(t)
	runs, steps := 40, 1000
	if testing.Short() {
		runs = 5
	}
	for run := range runs {
		strOneWriterRun(t, rng, steps, fmt.Sprintf("run %d", run))
	}
}

func strOneWriterRun(t *testing.T, rng *rand.Rand, steps int, name string) {
	t.Helper()
	self := Origin{Node: 1 + rng.Uint64N(math.MaxUint64), Inc: rng.Uint64()}
	scale := []int64{ms, 100 * ms, s}[rng.IntN(3)] // the pace of the run
	clock := t0 + rng.Int64N(1000*s)
	var model redisString
	var state []byte
	var history [][]byte // every state of the run
	values := []string{"0", "1", "-7", "abc", "", "9223372036854775806", "-9223372036854775807", "012"}
	for i := range steps {
		switch x := rng.IntN(20); {
		case x == 0:
			clock += 50 * scale * (1 + rng.Int64N(10))
		case x < 4: // the same instant
		default:
			clock += rng.Int64N(3 * scale)
		}
		now := clock
		if rng.IntN(8) == 0 {
			now -= rng.Int64N(5 * scale) // a stale timestamp
		}
		nowMs := unixMs(now)
		// future returns an expiry within about ten steps, or a past one.
		future := func() int64 {
			if rng.IntN(6) == 0 {
				return nowMs - rng.Int64N(3*scale/ms+1)
			}
			return nowMs + rng.Int64N(20*scale/ms+1)
		}
		before := bytes.Clone(state)
		var next []byte
		var op string
		var err, wantErr error
		var got, want any
		switch x := rng.IntN(100); {
		case x < 20:
			v := []byte(values[rng.IntN(len(values))])
			if rng.IntN(3) == 0 {
				v = strconv.AppendInt(nil, rng.Int64N(100)-50, 10)
			}
			var exp int64
			keep := rng.IntN(5) == 0
			if !keep && rng.IntN(3) == 0 {
				exp = max(future(), 1)
			}
			op = fmt.Sprintf("SET %q PXAT %d KEEPTTL %v", v, exp, keep)
			next, err = StrSet(state, self, now, v, exp, keep)
			model.set(nowMs, v, exp, keep)
		case x < 60:
			d := rng.Int64N(11) - 5
			if rng.IntN(20) == 0 {
				d = rng.Int64() >> rng.IntN(64)
				if rng.IntN(2) == 0 {
					d = -d - rng.Int64N(2) // MinInt64 too
				}
			}
			op = fmt.Sprintf("INCRBY %d", d)
			var res int64
			next, res, err = StrIncr(state, self, now, d)
			if counterFull(state, self, nowMs, d) && errors.Is(err, engines.ErrOverflow) {
				continue // the documented limit: a counter past 2^64-1; Redis has none
			}
			m := model
			wantRes, werr := m.incr(nowMs, d)
			if werr == nil {
				model = m
			}
			got, want, wantErr = res, wantRes, werr
			if err != nil {
				got = nil
			}
			if werr != nil {
				want = nil
			}
		case x < 70:
			op = "DEL"
			next, got, err = StrDel(state, self, now)
			want = model.del(nowMs)
		case x < 92:
			when := future()
			if rng.IntN(4) == 0 && model.exp != 0 {
				when = model.exp + rng.Int64N(3) - 1 // the same, or just either side
			}
			op = fmt.Sprintf("PEXPIREAT %d", when)
			next, got, err = StrExpire(state, self, now, when)
			want = model.expire(nowMs, when)
		default:
			op = "PERSIST"
			next, got, err = StrExpire(state, self, now, Persist)
			want = model.expire(nowMs, Persist)
		}
		step := fmt.Sprintf("%s step %d at t0%+d: %s", name, i, now-t0, op)
		if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) || got != want {
			t.Fatalf("%s: got %v, %v; Redis says %v, %v", step, got, err, want, wantErr)
		}
		if !bytes.Equal(state, before) {
			t.Fatalf("%s: the call modified its input", step)
		}
		if err != nil {
			continue
		}
		olds := [][]byte{state}
		if len(history) > 0 {
			olds = append(olds, history[rng.IntN(len(history))])
		}
		for _, old := range olds {
			if m, err := Merge(next, old); err != nil || !bytes.Equal(m, next) {
				t.Fatalf("%s: the new state does not absorb an earlier one:\n%x\n%x", step, next, old)
			}
		}
		state = next
		history = append(history, next)
		for _, at := range []int64{now, now + rng.Int64N(10*scale)} {
			if g, w := get(t, state, at), model.get(unixMs(at)); g != w {
				t.Fatalf("%s: GET at t0%+d: got %+v, Redis says %+v", step, at-t0, g, w)
			}
		}
	}
}

// counterFull reports whether self's counter on the register an increment
// at nowMs counts on would pass 2^64-1: the one limit a counter has that
// Redis' value does not.
func counterFull(state []byte, self Origin, nowMs, d int64) bool {
	s, err := decodeStr(state)
	if err != nil || (s.exists() && s.expiredAt(nowMs)) {
		return false
	}
	for _, c := range s.c {
		if c.o == self {
			u, cnt := c.p, uint64(d)
			if d < 0 {
				u, cnt = c.n, uint64(-d)
			}
			_, carry := bits.Add64(u, cnt, 0)
			return carry != 0
		}
	}
	return false
}
