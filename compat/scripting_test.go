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
