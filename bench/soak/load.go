package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/resp"
)

// The load: workers of three kinds, each drawing commands from the same mix.
//
//   - single: one connection, one command at a time;
//   - pipelined: one connection, batches of pipeDepth commands;
//   - churn: a new connection for every few commands (PING and a batch of
//     churnBatch), closed after them.
//
// Every command is drawn from mix, on keys spread over -keys names per kind,
// so the keyspace turns over: throttle keys expire once full again, SET
// keys after their EX.

const (
	pipeDepth  = 16
	churnBatch = 4
)

// op builds one command on a random key. Each kind has its own key prefix,
// so no command meets a key of another type (WRONGTYPE would be counted as
// an error).
type op struct {
	name   string
	weight int
	build  func(b []byte, r *rand.Rand, keys int, sha string) []byte
}

var mix = []op{
	{"CL.THROTTLE", 30, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "CL.THROTTLE", key("cl:", r, keys), "15", "30", "60")
	}},
	{"FWC.THROTTLE", 6, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "FWC.THROTTLE", key("fwc:", r, keys), "100", "60")
	}},
	{"SWL.THROTTLE", 6, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "SWL.THROTTLE", key("swl:", r, keys), "20", "10")
	}},
	{"SWC.THROTTLE", 6, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "SWC.THROTTLE", key("swc:", r, keys), "100", "60")
	}},
	{"TB.THROTTLE", 6, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "TB.THROTTLE", key("tb:", r, keys), "50", "10", "1")
	}},
	{"LB.THROTTLE", 6, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "LB.THROTTLE", key("lb:", r, keys), "10", "5", "1")
	}},
	{"GET", 15, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "GET", key("s:", r, keys))
	}},
	{"SET EX", 8, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		return resp.AppendCommand(b, "SET", key("s:", r, keys), "value-of-some-32-bytes-0123456789", "EX", "30")
	}},
	{"INCR", 8, func(b []byte, r *rand.Rand, keys int, _ string) []byte {
		// A bounded set of counters that never expire, as a gateway's
		// long-lived totals.
		return resp.AppendCommand(b, "INCR", key("c:", r, min(keys, 1000)))
	}},
	{"EVALSHA", 9, func(b []byte, r *rand.Rand, keys int, sha string) []byte {
		return resp.AppendCommand(b, "EVALSHA", sha, "1", key("lua:", r, keys), "15", "30", "60", "1")
	}},
}

var mixTotal = func() int {
	n := 0
	for _, o := range mix {
		n += o.weight
	}
	return n
}()

func key(prefix string, r *rand.Rand, keys int) string {
	return prefix + strconv.Itoa(r.IntN(keys))
}

// pick appends one command drawn from mix.
func pick(b []byte, r *rand.Rand, keys int, sha string) []byte {
	w := r.IntN(mixTotal)
	for _, o := range mix {
		if w < o.weight {
			return o.build(b, r, keys, sha)
		}
		w -= o.weight
	}
	panic("unreachable")
}

// counters are what the workers did, added up.
type counters struct {
	ops    atomic.Int64 // replies received
	errs   atomic.Int64 // error replies (-...) and failed connections
	conns  atomic.Int64 // connections opened
	lastEr atomic.Pointer[string]
}

func (c *counters) fail(what string) {
	c.errs.Add(1)
	c.lastEr.Store(&what)
}

// worker is one load generator.
type worker struct {
	kind  string // "single", "pipelined", "churn"
	addr  string
	keys  int
	sha   string
	seed  uint64
	count *counters
	// rate is the commands per second to send; 0 sends as fast as the
	// server answers. Set before run.
	rate float64
	done atomic.Int64 // commands this worker got replies for
}

func (w *worker) batch() int {
	switch w.kind {
	case "pipelined":
		return pipeDepth
	case "churn":
		return churnBatch
	}
	return 1
}

// run sends batches until ctx is done. A connection that fails is counted
// and opened again.
func (w *worker) run(ctx context.Context) {
	r := rand.New(rand.NewPCG(w.seed, 0x50a4))
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var buf []byte
	next := time.Now()
	n := w.batch()
	for ctx.Err() == nil {
		if w.rate > 0 {
			// Pace: each batch has its slot; sleep only when ahead by
			// a millisecond or more, and never catch up a backlog of
			// more than a second in a burst.
			next = next.Add(time.Duration(float64(n) / w.rate * float64(time.Second)))
			now := time.Now()
			if d := next.Sub(now); d >= time.Millisecond {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			} else if d < -time.Second {
				next = now
			}
		}
		if conn == nil {
			c, err := net.DialTimeout("tcp", w.addr, 5*time.Second)
			if err != nil {
				w.count.fail(w.kind + " worker, dial: " + err.Error())
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.count.conns.Add(1)
			conn, br = c, bufio.NewReader(c)
		}
		buf = buf[:0]
		want := n
		if w.kind == "churn" {
			buf = resp.AppendCommand(buf, "PING")
			want++
		}
		for range n {
			buf = pick(buf, r, w.keys, w.sha)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		err := w.exchange(conn, br, buf, want)
		if err != nil || w.kind == "churn" {
			if err != nil && ctx.Err() == nil {
				w.count.fail(w.kind + " worker: " + err.Error())
			}
			conn.Close()
			conn = nil
		}
	}
}

// exchange writes buf and reads want replies.
func (w *worker) exchange(conn net.Conn, br *bufio.Reader, buf []byte, want int) error {
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	for range want {
		isErr, err := readReply(br)
		if err != nil {
			return err
		}
		if isErr != "" {
			w.count.fail(w.kind + " worker, error reply: " + isErr)
		}
		w.count.ops.Add(1)
		w.done.Add(1)
	}
	return nil
}

var errProtocol = errors.New("soak: protocol error")

// readReply reads one RESP2 reply and returns the text of an error reply,
// "" for any other.
func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 {
		return "", fmt.Errorf("%w: %q", errProtocol, line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':':
		return "", nil
	case '-':
		return string(body), nil
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return "", fmt.Errorf("%w: %q", errProtocol, line)
		}
		if n >= 0 {
			if _, err := br.Discard(n + 2); err != nil {
				return "", err
			}
		}
		return "", nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return "", fmt.Errorf("%w: %q", errProtocol, line)
		}
		first := ""
		for range n {
			e, err := readReply(br)
			if err != nil {
				return "", err
			}
			first = cmp.Or(first, e)
		}
		return first, nil
	}
	return "", fmt.Errorf("%w: %q", errProtocol, line)
}
