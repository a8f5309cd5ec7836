package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// start runs src in the background; the returned function waits for the
// reply.
func start(t *testing.T, e *Engine, ctx context.Context, c Caller, src string) func() string {
	t.Helper()
	s, err := e.Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		w := writer(2)
		e.Run(ctx, s, nil, nil, c, w)
		done <- string(w.Bytes())
	}()
	return func() string {
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("script did not stop")
			return ""
		}
	}
}

func TestKill_InfiniteLoop(t *testing.T) {
	for _, src := range []string{
		"while true do end",
		"local n = 0\nwhile true do n = n + 1 end",
		// pcall must not be able to swallow the kill.
		"while true do pcall(function() while true do end end) end",
		"local co = coroutine.wrap(function() while true do end end)\nco()",
	} {
		t.Run(src, func(t *testing.T) {
			e := New(Options{TimeLimit: 20 * time.Millisecond, Logger: testLogger(t)})
			if err := e.Kill(); !errors.Is(err, ErrNotBusy) {
				t.Fatalf("Kill before: got %v, want ErrNotBusy", err)
			}
			wait := start(t, e, context.Background(), newFakeDB(), src)
			testwait.For(t, 10*time.Second, "busy", e.Busy)
			if err := e.Kill(); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			got := wait()
			if !strings.HasPrefix(got, "-ERR Script killed by user with SCRIPT KILL... script: "+SHA1Hex([]byte(src))+", on @user_script:") {
				t.Errorf("got %q", got)
			}
			if e.Busy() {
				t.Error("still busy after the script ended")
			}
			if err := e.Kill(); !errors.Is(err, ErrNotBusy) {
				t.Errorf("Kill after: got %v, want ErrNotBusy", err)
			}
		})
	}
}

func TestKill_ExactReply(t *testing.T) {
	e := New(Options{TimeLimit: time.Millisecond, Logger: testLogger(t)})
	src := "while true do end"
	wait := start(t, e, context.Background(), newFakeDB(), src)
	testwait.For(t, 10*time.Second, "busy", e.Busy)
	testwait.For(t, 10*time.Second, "kill", func() bool { return e.Kill() == nil })
	want := "-ERR Script killed by user with SCRIPT KILL... script: " + SHA1Hex([]byte(src)) + ", on @user_script:1.\r\n"
	if got := wait(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestKill_NotBusyBeforeTimeLimit(t *testing.T) {
	e := New(Options{TimeLimit: time.Hour, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan struct{})
	db := newFakeDB()
	db.onCall = func(*Exec, []string) { close(running) }
	src := "redis.call('ping') while true do end"
	wait := start(t, e, ctx, db, src)
	<-running
	if e.Busy() {
		t.Error("busy before the time limit")
	}
	if err := e.Kill(); !errors.Is(err, ErrNotBusy) {
		t.Errorf("Kill: got %v, want ErrNotBusy", err)
	}
	// Cancelling the context stops it.
	cancel()
	want := "-ERR Script aborted: context canceled script: " + SHA1Hex([]byte(src)) + ", on @user_script:1.\r\n"
	if got := wait(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestKill_Unkillable(t *testing.T) {
	e := New(Options{TimeLimit: 10 * time.Millisecond, Logger: testLogger(t)})
	db := newFakeDB()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := start(t, e, ctx, db, "redis.call('set', 'k', 'v') while not redis.call('get', 'stop') do end return 'done'")
	testwait.For(t, 10*time.Second, "busy", e.Busy)
	if err := e.Kill(); !errors.Is(err, ErrUnkillable) {
		t.Fatalf("Kill: got %v, want ErrUnkillable", err)
	}
	cancel() // a written script ignores its context too
	db.mu.Lock()
	db.data["stop"] = "1"
	db.mu.Unlock()
	if got := wait(); got != bulk("done") {
		t.Errorf("got %q, want done", got)
	}
}

// TestKill_BeforeWrite checks that a write after the kill is refused by
// MarkWrite, so a killed script leaves nothing half done.
func TestKill_BeforeWrite(t *testing.T) {
	e := New(Options{TimeLimit: time.Nanosecond, Logger: testLogger(t)})
	db := newFakeDB()
	db.onCall = func(x *Exec, args []string) {
		if args[0] == "ping" {
			if err := e.Kill(); err != nil {
				t.Errorf("Kill: %v", err)
			}
		}
	}
	got := eval(t, e, db, 2, "redis.call('ping') redis.call('set', 'k', 'v') return 1", nil, nil)
	if !strings.HasPrefix(got, "-ERR Script killed by user with SCRIPT KILL...") {
		t.Errorf("got %q", got)
	}
	if _, ok := db.data["k"]; ok {
		t.Error("the write after the kill happened")
	}
}

func TestExec_MarkWrite(t *testing.T) {
	var x Exec
	x.state.v.Store(7 << stateBits) // run 7
	if x.Wrote() || !x.MarkWrite() || !x.Wrote() || !x.MarkWrite() {
		t.Fatal("MarkWrite on a live run must succeed")
	}
	if r := x.state.stop(7, stateKilled); r != stopWrote {
		t.Errorf("stop after a write: got %v", r)
	}
	x.state.v.Store(8 << stateBits)
	if r := x.state.stop(7, stateKilled); r != stopOver {
		t.Errorf("stop of an ended run: got %v", r)
	}
	if r := x.state.stop(8, stateKilled); r != stopDone {
		t.Errorf("stop of a clean run: got %v", r)
	}
	if r := x.state.stop(8, stateAborted); r != stopAlready {
		t.Errorf("second stop: got %v", r)
	}
	if x.MarkWrite() {
		t.Error("MarkWrite succeeded after a kill")
	}
}

func TestTimeLimit(t *testing.T) {
	e := New(Options{})
	if got := e.TimeLimit(); got != 5*time.Second {
		t.Errorf("default: got %v", got)
	}
	e.SetTimeLimit(-1)
	db := newFakeDB()
	running := make(chan struct{})
	db.onCall = func(_ *Exec, args []string) {
		if args[0] == "ping" {
			close(running)
		}
	}
	wait := start(t, e, context.Background(), db, "redis.call('ping') while not redis.call('get', 'stop') do end return 1")
	<-running
	if e.Busy() || !errors.Is(e.Kill(), ErrNotBusy) {
		t.Error("a negative limit must never be busy")
	}
	db.mu.Lock()
	db.data["stop"] = "1"
	db.mu.Unlock()
	if got := wait(); got != ":1\r\n" {
		t.Errorf("got %q", got)
	}
}
