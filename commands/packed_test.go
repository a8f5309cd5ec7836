package commands

import (
	"fmt"
	"testing"

	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// TestPackedStates_OneCommand: the store holds FWC states packed in their
// slots and a command reads them into room from its connection
// (Ctx.stateBuf). THROTTLE.ALL on six such keys reads them all before it
// decides: each limit must decide on its own key's state, through the
// buffer's growth and on a second command that reuses it.
func TestPackedStates_OneCommand(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	const n = 6
	args := []string{"THROTTLE.ALL"}
	for i := 1; i <= n; i++ {
		key := fmt.Sprint("f", i)
		do(s, c, "FWC.THROTTLE", key, "100", "60", fmt.Sprint(i)) // i units counted
		args = append(args, "LIMIT", "FWC", key, "100", "60")
	}
	for round := 1; round <= 2; round++ {
		if r := do(s, c, args...); r[:4] != "*7\r\n" {
			t.Fatalf("THROTTLE.ALL: %q", r)
		}
		for i := 1; i <= n; i++ {
			got := replyInts(t, do(s, c, "FWC.THROTTLE", fmt.Sprint("f", i), "100", "60", "0"))
			if want := int64(100 - i - round); got[2] != want {
				t.Errorf("round %d: f%d has %d remaining, want %d", round, i, got[2], want)
			}
		}
	}
}

// TestPackedStates_RoomStartsOver: each command, a script's inner ones
// too, starts the connection's room for packed states over, so a script
// that decides a thousand times keeps a few states' worth, not a thousand.
func TestPackedStates_RoomStartsOver(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	do(s, c, "FWC.THROTTLE", "f", "100000", "60")
	script := "for i = 1, 1000 do redis.call('FWC.THROTTLE', KEYS[1], 100000, 60) end return 1"
	if r := do(s, c, "EVAL", script, "1", "f"); r != ":1\r\n" {
		t.Fatalf("EVAL: %q", r)
	}
	if got := replyInts(t, do(s, c, "FWC.THROTTLE", "f", "100000", "60", "0")); got[2] != 100000-1001 {
		t.Fatalf("remaining %d, want %d", got[2], 100000-1001)
	}
	if n := cap(s.state(c).unpacked); n > 4*store.PackedLen {
		t.Fatalf("the connection keeps %d bytes of room", n)
	}
}
