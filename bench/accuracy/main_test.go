package main

import (
	"io"
	"slices"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-addr", "127.0.0.1:1,127.0.0.1:2", "-lag", "20ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.acc.Addrs, []string{"127.0.0.1:1", "127.0.0.1:2"}) || c.acc.Lag != 20*time.Millisecond {
		t.Errorf("got %+v", c.acc)
	}
	// A mesh's clock cannot go back: its replay starts after the present,
	// on the minute.
	if now := time.Now().UnixNano(); c.acc.Start <= now || c.acc.Start%int64(time.Minute) != 0 {
		t.Errorf("mesh start %d, now %d", c.acc.Start, now)
	}
	if c, err := parseFlags(nil, io.Discard); err != nil || c.acc.Start != 0 || len(c.acc.Addrs) != 0 {
		t.Errorf("no -addr: got %+v, %v", c.acc, err)
	}
	for _, args := range [][]string{{"-minutes", "0"}, {"-lag", "0s"}, {"x"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}
