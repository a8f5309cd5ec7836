package scripting

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/throttleddb/throttled/resp"
)

// fakeDB is a Caller over a tiny keyspace with a few string commands, enough
// for the scripts of the tests. Replies are encoded by resp.Writer, as the
// real command layer does. Safe for concurrent use.
type fakeDB struct {
	mu     sync.Mutex
	data   map[string]string
	ttl    map[string]int64
	calls  [][]string // every call, for tests that check arguments
	w      resp.Conn
	onCall func(x *Exec, args []string) // runs before each command, if set
}

func newFakeDB() *fakeDB {
	return &fakeDB{data: map[string]string{}, ttl: map[string]int64{}}
}

var writeCommands = map[string]bool{"incr": true, "incrby": true, "set": true, "expire": true, "del": true}

func (db *fakeDB) Call(x *Exec, args [][]byte) []byte {
	db.mu.Lock()
	defer db.mu.Unlock()
	// Concurrent runs share the fake: hand each its own copy.
	return append([]byte(nil), db.call(x, args)...)
}

func (db *fakeDB) call(x *Exec, args [][]byte) []byte {
	a := make([]string, len(args))
	for i, b := range args {
		a[i] = string(b)
	}
	db.calls = append(db.calls, a)
	if db.onCall != nil {
		db.onCall(x, a)
	}
	w := &db.w.W
	db.w.SetProto(x.Proto())
	w.Truncate(0)
	name := strings.ToLower(a[0])
	arity := map[string]int{"incr": 2, "incrby": 3, "get": 2, "set": -3, "expire": 3, "exists": -2, "del": -2, "time": 1, "ping": -1, "hgetall": 2, "type": 2}
	n, ok := arity[name]
	switch {
	case !ok:
		w.Error(ReplyUnknownCommand)
		return w.Bytes()
	case n > 0 && len(a) != n, n < 0 && len(a) < -n:
		w.Error(ReplyWrongArity)
		return w.Bytes()
	}
	if writeCommands[name] && !x.MarkWrite() {
		w.Error("ERR killed")
		return w.Bytes()
	}
	switch name {
	case "incr", "incrby":
		by := int64(1)
		if name == "incrby" {
			v, err := strconv.ParseInt(a[2], 10, 64)
			if err != nil {
				w.Error("ERR value is not an integer or out of range")
				return w.Bytes()
			}
			by = v
		}
		cur, err := strconv.ParseInt(db.orZero(a[1]), 10, 64)
		if err != nil {
			w.Error("ERR value is not an integer or out of range")
			return w.Bytes()
		}
		db.data[a[1]] = strconv.FormatInt(cur+by, 10)
		w.Int(cur + by)
	case "get":
		if v, ok := db.data[a[1]]; ok {
			w.BulkString(v)
		} else {
			w.Null()
		}
	case "set":
		db.data[a[1]] = a[2]
		w.OK()
	case "expire":
		if _, ok := db.data[a[1]]; !ok {
			w.Int(0)
			return w.Bytes()
		}
		secs, err := strconv.ParseInt(a[2], 10, 64)
		if err != nil {
			w.Error("ERR value is not an integer or out of range")
			return w.Bytes()
		}
		db.ttl[a[1]] = secs
		w.Int(1)
	case "exists", "del":
		n := int64(0)
		for _, k := range a[1:] {
			if _, ok := db.data[k]; ok {
				n++
				if name == "del" {
					delete(db.data, k)
				}
			}
		}
		w.Int(n)
	case "time":
		w.Array(2)
		w.BulkString("1700000000")
		w.BulkString("123456")
	case "ping":
		w.Status("PONG")
	case "type":
		w.Status("string")
	case "hgetall": // a fixed map, for the RESP3 conversion
		w.Map(2)
		w.BulkString("f1")
		w.BulkString("v1")
		w.BulkString("f2")
		w.Int(2)
	}
	return w.Bytes()
}

func (db *fakeDB) orZero(k string) string {
	if v, ok := db.data[k]; ok {
		return v
	}
	return "0"
}

// rawCaller answers every call with fixed bytes.
func rawCaller(reply string) Caller {
	return CallerFunc(func(*Exec, [][]byte) []byte { return []byte(reply) })
}

// writer returns a resp.Writer speaking proto.
func writer(proto int) *resp.Writer {
	c := new(resp.Conn)
	c.SetProto(proto)
	return &c.W
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newEngine(t testing.TB) *Engine { return New(Options{Logger: testLogger(t)}) }

// eval loads and runs src the way EVAL does and returns the reply bytes.
func eval(t testing.TB, e *Engine, c Caller, proto int, src string, keys, argv []string) string {
	t.Helper()
	w := writer(proto)
	s, err := e.Load([]byte(src))
	if err != nil {
		var re *ReplyError
		if !errors.As(err, &re) {
			t.Fatalf("Load(%q): %v", src, err)
		}
		w.Error(re.Reply)
		return string(w.Bytes())
	}
	e.Run(context.Background(), s, bs(keys), bs(argv), c, w)
	return string(w.Bytes())
}

func bs(ss []string) [][]byte {
	b := make([][]byte, len(ss))
	for i, s := range ss {
		b[i] = []byte(s)
	}
	return b
}
