package compat

import (
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/server"
)

// TestScript_BusyAndKill: a script past busy-reply-threshold makes other
// clients get BUSY (SCRIPT KILL still runs), SCRIPT KILL stops it, its
// client gets Redis' error, and the server answers normally again.
func TestScript_BusyAndKill(t *testing.T) {
	n := e2eNode(t, server.Config{})
	a, b := e2eDial(t, n.Addr()), e2eDial(t, n.Addr())
	e2eMustDo(t, b, "+OK\r\n", "CONFIG", "SET", "busy-reply-threshold", "50")
	if _, err := a.Write(e2eMultibulk("EVAL", "while true do end", "0")); err != nil {
		t.Fatal(err)
	}
	const busy = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := b.Do("PING")
		if err != nil {
			t.Fatal(err)
		}
		if got == busy {
			break
		}
		if got != "+PONG\r\n" || time.Now().After(deadline) {
			t.Fatalf("PING while the script runs: %q", got)
		}
		time.Sleep(5 * time.Millisecond) // polling until the script is past its threshold
	}
	e2eMustDo(t, b, busy, "GET", "k")
	e2eMustDo(t, b, "+OK\r\n", "SCRIPT", "KILL")
	if err := a.SetDeadline(time.Now().Add(e2eIOWait)); err != nil {
		t.Fatal(err)
	}
	got, err := e2eReadReply(a.rd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "-ERR Script killed by user with SCRIPT KILL... script: ") {
		t.Errorf("the killed script's client got %q", got)
	}
	e2eMustDo(t, b, "+PONG\r\n", "PING")
	e2eMustDo(t, a, "-NOTBUSY No scripts in execution right now.\r\n", "SCRIPT", "KILL")
}

// TestScript_UndeclaredKeys: a script may touch keys it did not declare; the
// write lands and is atomic with the rest of the script.
func TestScript_UndeclaredKeys(t *testing.T) {
	n := e2eNode(t, server.Config{})
	c := e2eDial(t, n.Addr())
	e2eMustDo(t, c, ":3\r\n", "EVAL", "for i = 1, 50 do redis.call('incr', 'k' .. i) end return redis.call('incr', 'k1') + redis.call('get', 'k50')", "0")
	e2eMustDo(t, c, "$1\r\n2\r\n", "GET", "k1")
	e2eMustDo(t, c, ":50\r\n", "EVAL", "return #redis.call('keys', 'k*')", "0")
}

// TestScript_MultiWhileBusy (issue 22, item 2): while a script is busy,
// MULTI begins a transaction (Redis' allow-busy), a command refused with
// BUSY makes its EXEC abort, and the key is left alone; the same replies
// as redis-server's, live.
func TestScript_MultiWhileBusy(t *testing.T) {
	run := func(addr string) []string {
		a, b, c := e2eDial(t, addr), e2eDial(t, addr), e2eDial(t, addr)
		e2eMustDo(t, b, "+OK\r\n", "CONFIG", "SET", "busy-reply-threshold", "50")
		if _, err := a.Write(e2eMultibulk("EVAL", "while true do end", "0")); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := b.Do("PING")
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(got, "-BUSY") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("PING while the script runs: %q", got)
			}
			time.Sleep(5 * time.Millisecond) // polling until the script is past its threshold
		}
		var replies []string
		do := func(conn *e2eConn, args ...string) {
			got, err := conn.Do(args...)
			if err != nil {
				t.Fatal(err)
			}
			replies = append(replies, got)
		}
		do(c, "MULTI")
		do(c, "INCR", "xx")
		do(b, "SCRIPT", "KILL")
		// Redis may still answer BUSY for a moment after KILL's OK: wait
		// until the script is over.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if got, err := b.Do("PING"); err != nil || got == "+PONG\r\n" || time.Now().After(deadline) {
				break
			}
		}
		do(c, "INCR", "xx")
		do(c, "EXEC")
		do(c, "GET", "xx")
		return replies
	}
	redis := run(startRedis(t, ""))
	throttled := run(e2eNode(t, server.Config{}).Addr())
	if strings.Join(throttled, "") != strings.Join(redis, "") {
		t.Errorf("throttled %q\nredis-server %q", throttled, redis)
	}
	if len(redis) != 6 || redis[0] != "+OK\r\n" || !strings.HasPrefix(redis[4], "-EXECABORT") {
		t.Errorf("redis-server answered %q", redis)
	}
}
