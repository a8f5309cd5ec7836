package commands

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// compat/testdata/slowlog.txt checks SLOWLOG's replies against
// redis-server; these tests cover what a socket cannot show.

func newSlowlogServer(t *testing.T, cfg SlowlogConfig) *Server {
	t.Helper()
	m := clock.NewManual(t0)
	return newServer(t, Config{Clock: m, Manual: m, Slowlog: &cfg})
}

func TestSlowArgs_Secrets(t *testing.T) {
	many := []string{"AUTH"}
	for i := range 40 {
		many = append(many, fmt.Sprint("p", i))
	}
	wantMany := []string{"AUTH"}
	for range 30 {
		wantMany = append(wantMany, "(redacted)")
	}
	wantMany = append(wantMany, "... (10 more arguments)")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"AUTH", "pw"}, []string{"AUTH", "(redacted)"}},
		{[]string{"auth", "user", "pw"}, []string{"auth", "(redacted)", "(redacted)"}},
		{[]string{"AUTH", "a", "b", "c"}, []string{"AUTH", "(redacted)", "(redacted)", "(redacted)"}},
		{many, wantMany},
		{[]string{"HELLO", "3", "AUTH", "u", "pw", "SETNAME", "n"}, []string{"HELLO", "3", "AUTH", "(redacted)", "(redacted)", "SETNAME", "n"}},
		{[]string{"HELLO", "3", "SETNAME", "auth", "auth", "u", "pw"}, []string{"HELLO", "3", "SETNAME", "auth", "auth", "(redacted)", "(redacted)"}},
		// A dangling AUTH is a syntax error, but what follows it may be a
		// password all the same.
		{[]string{"HELLO", "3", "AUTH", "pw"}, []string{"HELLO", "3", "AUTH", "(redacted)"}},
		{[]string{"HELLO", "3", "bogus", "AUTH", "u", "pw"}, []string{"HELLO", "3", "bogus", "AUTH", "(redacted)", "(redacted)"}},
		{[]string{"CONFIG", "SET", "maxkeys", "5", "RequirePass", "pw"}, []string{"CONFIG", "SET", "maxkeys", "5", "RequirePass", "(redacted)"}},
		{[]string{"CONFIG", "SET", "requirepass", "pw", "requirepass"}, []string{"CONFIG", "SET", "requirepass", "(redacted)", "requirepass"}},
		{[]string{"CONFIG", "GET", "requirepass"}, []string{"CONFIG", "GET", "requirepass"}},
		{[]string{"GET", "requirepass"}, []string{"GET", "requirepass"}},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		spec := newTable(specs).lookup(args[0])
		if got := slowArgs(spec, args); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestSlowlog_Apply: a command a replica applies from the log has no
// client; it is logged at the entry's instant.
func TestSlowlog_Apply(t *testing.T) {
	s := newSlowlogServer(t, SlowlogConfig{SlowerThan: 0, MaxLen: 10})
	const at = t0 + 42e9
	var w resp.Writer
	w.Reset(2)
	s.Apply(at, &Command{Args: [][]byte{[]byte("SET"), []byte("k"), []byte("v")}}, &w)
	if got := string(w.Bytes()); got != "+OK\r\n" {
		t.Fatalf("apply: %q", got)
	}
	got := do(s, &resp.Conn{}, "SLOWLOG", "GET")
	want := fmt.Sprintf("*1\r\n*6\r\n:0\r\n:%d\r\n:", at/1e9)
	rest, ok := strings.CutPrefix(got, want)
	_, dur, _ := strings.Cut(rest, "\r\n")
	if !ok || !strings.HasSuffix(got, "\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$3\r\n?:0\r\n$0\r\n\r\n") || dur == "" {
		t.Fatalf("SLOWLOG GET: got %q, want the SET at %d s from ?:0", got, at/1e9)
	}
}

func TestSlowlog_ThresholdAndLength(t *testing.T) {
	s := newSlowlogServer(t, SlowlogConfig{SlowerThan: 60e6, MaxLen: 3})
	c := &resp.Conn{}
	for range 5 {
		do(s, c, "PING")
	}
	if got := do(s, c, "SLOWLOG", "LEN"); got != ":0\r\n" {
		t.Fatalf("nothing ran for a minute, SLOWLOG LEN: %q", got)
	}
	do(s, c, "CONFIG", "SET", "slowlog-log-slower-than", "0")
	for i := range 5 {
		do(s, c, "ECHO", fmt.Sprint(i))
	}
	got := do(s, c, "SLOWLOG", "GET", "-1")
	for _, want := range []string{"$1\r\n4\r\n", "$1\r\n3\r\n", "$1\r\n2\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("SLOWLOG GET -1 lacks %q: %q", want, got)
		}
	}
	if !strings.HasPrefix(got, "*3\r\n*6\r\n:5\r\n") {
		t.Errorf("SLOWLOG GET -1: got %q, want the 3 newest, id 5 first", got)
	}
	if got := do(s, c, "SLOWLOG", "LEN"); got != ":3\r\n" {
		t.Errorf("SLOWLOG LEN: got %q, want 3", got)
	}
}

func TestSlowlogConfig_Validate(t *testing.T) {
	st, err := store.New(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SlowlogConfig{{SlowerThan: -2, MaxLen: 1}, {SlowerThan: 0, MaxLen: -1}} {
		if _, err := New(Config{Store: st, Clock: clock.Real{}, Slowlog: &bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", bad, err)
		}
	}
	if err := DefaultSlowlog.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
