package commands

import (
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// TestDebugDigest_Atomic: DEBUG DIGEST and DEBUG DIGEST-VALUE read at one
// instant under the locks of what they read. Writers move a and b together
// in MULTI/EXEC, and no reader sees them apart; under -race a read without
// the lock would be reported too.
func TestDebugDigest_Atomic(t *testing.T) {
	s, _ := newTestServer(t)
	const writers, rounds = 2, 200
	// states holds the reply of DEBUG DIGEST for a = b = n, for every n the
	// writers pass through (0: neither key exists yet).
	states := map[string]bool{}
	ref, err := store.New(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for n := range int64(writers*rounds + 1) {
		tx := ref.Tx(t0)
		if n > 0 {
			tx.Put(0, []byte("a"), store.IntValue(n), 0)
			tx.Put(0, []byte("b"), store.IntValue(n), 0)
		}
		d := tx.Digest(nil)
		states["+"+hex.EncodeToString(d[:])+"\r\n"] = true
	}

	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			c := &resp.Conn{}
			for range rounds {
				do(s, c, "MULTI")
				do(s, c, "INCR", "a")
				do(s, c, "INCR", "b")
				if got := do(s, c, "EXEC"); !strings.HasPrefix(got, "*2\r\n") {
					t.Errorf("EXEC: %q", got)
					return
				}
			}
		})
	}
	wg.Go(func() {
		c := &resp.Conn{}
		for range rounds {
			if got := do(s, c, "DEBUG", "DIGEST"); !states[got] {
				t.Errorf("DEBUG DIGEST %q: not a state with a = b", got)
				return
			}
		}
	})
	wg.Go(func() {
		// Inside EXEC, DEBUG DIGEST must have every shard locked as well.
		c := &resp.Conn{}
		for range rounds {
			do(s, c, "MULTI")
			do(s, c, "DEBUG", "DIGEST")
			got, ok := strings.CutPrefix(do(s, c, "EXEC"), "*1\r\n")
			if !ok || !states[got] {
				t.Errorf("EXEC of DEBUG DIGEST %q: not a state with a = b", got)
				return
			}
		}
	})
	wg.Go(func() {
		c := &resp.Conn{}
		for range rounds {
			got := strings.Split(do(s, c, "DEBUG", "DIGEST-VALUE", "a", "b"), "\r\n")
			if len(got) != 4 || got[0] != "*2" || got[1] != got[2] {
				t.Errorf("DEBUG DIGEST-VALUE a b: %q, want two equal digests", got)
				return
			}
		}
	})
	wg.Wait()
}

// TestDebug_LocksWhatItReads: with one shard held by another command,
// DEBUG CLOCK and DEBUG DIGEST-VALUE of a key elsewhere answer at once, and
// DEBUG DIGEST and DEBUG DIGEST-VALUE of a key there wait for the shard and
// see what the holder wrote last (under -race a read without the lock is
// reported whatever the timing).
func TestDebug_LocksWhatItReads(t *testing.T) {
	s, _ := newTestServer(t)
	held := []byte("held")
	other := []byte("other")
	for i := 0; s.store.ShardOf(other) == s.store.ShardOf(held); i++ {
		other = fmt.Appendf(nil, "other%d", i)
	}
	var l store.LockSet
	l.Add(s.store, held)
	s.store.Lock(&l)
	locked := true
	defer func() {
		if locked {
			s.store.Unlock(&l)
		}
	}()
	tx := s.store.Tx(t0)
	tx.Put(0, held, store.IntValue(1), 0)

	run := func(args ...string) <-chan string {
		out := make(chan string, 1)
		go func() { out <- do(s, &resp.Conn{}, args...) }()
		return out
	}
	wait := func(what string, out <-chan string) string {
		t.Helper()
		select {
		case got := <-out:
			return got
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no reply", what)
			return ""
		}
	}
	if got := wait("DEBUG CLOCK", run("DEBUG", "CLOCK")); !strings.HasPrefix(got, ":") {
		t.Errorf("DEBUG CLOCK: %q", got)
	}
	if got, want := wait("DEBUG DIGEST-VALUE other", run("DEBUG", "DIGEST-VALUE", string(other))), "*1\r\n+"+strings.Repeat("0", 40)+"\r\n"; got != want {
		t.Errorf("DEBUG DIGEST-VALUE other: got %q, want %q", got, want)
	}
	digest := run("DEBUG", "DIGEST")
	value := run("DEBUG", "DIGEST-VALUE", string(held))
	tx.Put(0, held, store.IntValue(2), 0)
	s.store.Unlock(&l)
	locked = false
	c := &resp.Conn{}
	if got, want := wait("DEBUG DIGEST", digest), do(s, c, "DEBUG", "DIGEST"); got != want {
		t.Errorf("DEBUG DIGEST: got %q, want %q (held = 2)", got, want)
	}
	if got, want := wait("DEBUG DIGEST-VALUE held", value), do(s, c, "DEBUG", "DIGEST-VALUE", string(held)); got != want {
		t.Errorf("DEBUG DIGEST-VALUE held: got %q, want %q (held = 2)", got, want)
	}
}
