package resp

import (
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// limited is a mode's set with the default client limits changed by l.
func limited(set func(*Server), l func(*ClientLimits)) func(*Server) {
	return func(s *Server) {
		set(s)
		lim := DefaultClientLimits()
		l(&lim)
		s.SetClientLimits(lim)
	}
}

// memOf returns the published figures of the one connection s serves,
// zero before it is served.
func memOf(t *testing.T, s *Server) ConnMem {
	t.Helper()
	var m []ConnMem
	s.ForEachConn(func(c *Conn) { m = append(m, c.Mem()) })
	if len(m) > 1 {
		t.Fatalf("%d connections, want 1", len(m))
	}
	return append(m, ConnMem{})[0]
}

// TestLimits_MaxClients: with maxclients open, the next connection gets
// Redis' error and is closed; once one leaves, a new one is served.
func TestLimits_MaxClients(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		s, addr := start(t, newTestHandler(), limited(set, func(l *ClientLimits) { l.MaxClients = 2 }))
		a, b := dial(t, addr), dial(t, addr)
		for _, c := range []*client{a, b} {
			c.send("PING")
			c.expect("+PONG")
		}
		over := dial(t, addr)
		over.expectBytes([]byte("-ERR max number of clients reached\r\n"))
		over.expectEOF()
		if got := s.Stats(); got.Rejected != 1 || got.Received != 2 {
			t.Errorf("stats %+v, want 1 rejected of 3, 2 received", got)
		}
		a.nc.Close()
		testwait.For(t, 10*time.Second, "a free place", func() bool {
			c := dial(t, addr)
			defer c.nc.Close()
			c.send("PING")
			return c.reply() == "+PONG"
		})
	})
}

// TestLimits_Timeout: a connection that sends nothing for the timeout is
// closed; one that keeps talking is not.
func TestLimits_Timeout(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		_, addr := start(t, newTestHandler(), limited(set, func(l *ClientLimits) { l.Timeout = 300 * time.Millisecond }))
		idle, busy := dial(t, addr), dial(t, addr)
		idle.send("PING")
		idle.expect("+PONG")
		start := time.Now()
		// busy talks until idle is gone; each of its rounds is a read
		// and a write, well within the timeout.
		done := make(chan struct{})
		go func() {
			defer close(done)
			idle.expectEOF()
		}()
		for waiting := true; waiting; {
			busy.send("PING")
			busy.expect("+PONG")
			select {
			case <-done:
				waiting = false
			case <-time.After(20 * time.Millisecond):
			}
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("idle client closed after %v, before the timeout", took)
		}
		busy.send("PING")
		busy.expect("+PONG")
	})
}

// TestLimits_CronSleeps: with no connection, cron sleeps (the coarse
// clock stands still) instead of looking 10 times a second; the next
// connection wakes it with the clock set to now, so that the timeout
// counts from its arrival, not from before the sleep.
func TestLimits_CronSleeps(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		const timeout = 500 * time.Millisecond
		s, addr := start(t, newTestHandler(), limited(set, func(l *ClientLimits) { l.Timeout = timeout }))
		asleep := func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.cronAsleep.Load()
		}
		testwait.For(t, 5*time.Second, "cron asleep with no connection", asleep)
		before := s.tick.Load()
		// Longer than the timeout, and many of cron's periods.
		time.Sleep(timeout + 5*cronEvery)
		if s.tick.Load() != before {
			t.Fatal("the coarse clock moved: cron looked with no connection")
		}
		c := dial(t, addr)
		c.send("PING")
		c.expect("+PONG")
		if asleep() {
			t.Fatal("cron still asleep with a connection")
		}
		if age := time.Since(time.Unix(0, s.tick.Load())); age > timeout {
			t.Fatalf("the coarse clock is %v old with a connection", age)
		}
		// Quiet for most of the timeout, yet well past it since cron slept.
		time.Sleep(timeout / 2)
		c.send("PING")
		c.expect("+PONG")
		// The timeout still applies.
		c.expectEOF()
		c.nc.Close()
		testwait.For(t, 5*time.Second, "cron asleep once the connection left", asleep)
	})
}

// TestLimits_CronSleepsWithIdleConnections: with no timeout set, cron
// also sleeps once every connection has idled past a trim (its buffers
// asked back); a request wakes it and is answered, with the clock at now.
func TestLimits_CronSleepsWithIdleConnections(t *testing.T) {
	s, addr := start(t, newTestHandler(), modes[0].set)
	c := dial(t, addr)
	c.send("PING")
	c.expect("+PONG")
	asleep := func() bool { return s.cronAsleep.Load() }
	testwait.For(t, 10*time.Second, "cron asleep with an idle connection", asleep)
	// It asked the loop before it slept, which gives them back at once.
	testwait.For(t, 5*time.Second, "the idle connection's buffer given back", func() bool { return memOf(t, s).ReadBuf == 0 })
	before := s.tick.Load()
	time.Sleep(5 * cronEvery)
	if s.tick.Load() != before {
		t.Fatal("the coarse clock moved: cron looked with only an idle connection")
	}
	c.send("PING")
	c.expect("+PONG")
	if asleep() {
		t.Fatal("cron still asleep after a request")
	}
	if age := time.Since(time.Unix(0, s.tick.Load())); age > time.Second {
		t.Fatalf("the coarse clock is %v old after a request", age)
	}
	// Asleep again, a timeout set from elsewhere than a connection (which
	// would wake it) applies: cron wakes and closes the idle connection.
	testwait.For(t, 10*time.Second, "cron asleep again", asleep)
	lim := DefaultClientLimits()
	lim.Timeout = 300 * time.Millisecond
	s.SetClientLimits(lim)
	c.expectEOF()
}

// TestLimits_QueryBuffer: a request that outgrows
// client-query-buffer-limit closes the connection without a reply; the
// figure is in CLIENT LIST's qbuf while it grows.
func TestLimits_QueryBuffer(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		s, addr := start(t, newTestHandler(), limited(set, func(l *ClientLimits) { l.MaxQueryLen = 1 << 20 }))
		c := dial(t, addr)
		c.send("*2\r\n$4\r\nECHO\r\n$2000000\r\n" + strings.Repeat("x", 1000))
		testwait.For(t, 10*time.Second, "qbuf of the partial request", func() bool { return memOf(t, s).QueryBuf >= 1000 })
		if _, err := c.nc.Write([]byte(strings.Repeat("x", 2<<20))); err != nil {
			t.Logf("write: %v (the server may close first)", err)
		}
		c.expectEOF()
		testwait.For(t, 10*time.Second, "the closing counted", func() bool { return s.Stats().QueryLimit == 1 })
	})
}

// TestLimits_OutputHard: a reply past the hard limit closes the
// connection without sending it, and stops costing memory at the limit.
func TestLimits_OutputHard(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		s, addr := start(t, newTestHandler(), limited(set, func(l *ClientLimits) { l.Output.Hard = 64 << 10 }))
		c := dial(t, addr)
		c.send("BIG 1000")
		c.expect(strings.Repeat("x", 1000))
		c.send("BIG 100000")
		c.expectEOF()
		if got := s.Stats().OutputLimit; got != 1 {
			t.Errorf("%d closed for the output limit, want 1", got)
		}
		ok := dial(t, addr)
		ok.send("BIG 60000")
		ok.expect(strings.Repeat("x", 60000))
	})
}

// TestLimits_OutputSoft: a client that asks and does not read is closed
// once its replies stay over the soft limit for its time; CLIENT LIST
// shows them meanwhile.
func TestLimits_OutputSoft(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		s, addr := start(t, newTestHandler(), limited(set, func(l *ClientLimits) {
			l.Output = OutputLimit{Soft: 1, SoftFor: 300 * time.Millisecond}
		}))
		c := dial(t, addr)
		// Far more than the socket buffers hold, so that the server
		// holds some, and reads none of it.
		for range 64 {
			c.send("BIG 1000000")
		}
		start := time.Now()
		testwait.For(t, 10*time.Second, "replies held", func() bool { return memOf(t, s).Output > 0 })
		testwait.For(t, 10*time.Second, "the client closed", func() bool { return s.Stats().OutputLimit == 1 })
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("closed after %v, before the soft limit's time", took)
		}
		// A client that reads gets the same replies and stays.
		ok := dial(t, addr)
		for range 8 {
			ok.send("BIG 1000000")
		}
		for range 8 {
			ok.expect(strings.Repeat("x", 1000000))
		}
		ok.send("PING")
		ok.expect("+PONG")
	})
}

// TestLimits_OutputAfterReply: a reply the client has received is never
// shown as still waiting (omem), however soon another connection looks:
// a write the socket took at once is not a blocked one. It looked in 1
// round of 30 with TLS before.
func TestLimits_OutputAfterReply(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		s, addr := start(t, newTestHandler(), set)
		c := dial(t, addr)
		for i := range 3000 {
			c.send("BIG 100")
			c.expect(strings.Repeat("x", 100))
			if out := memOf(t, s).Output; out != 0 {
				t.Fatalf("round %d: omem %d after the reply was read", i, out)
			}
		}
	})
}

// TestLimits_IdleBuffers: an event loop gives back the read buffer of a
// connection idle for trimAfter; its next request is served as usual.
func TestLimits_IdleBuffers(t *testing.T) {
	s, addr := start(t, newTestHandler(), modes[0].set)
	c := dial(t, addr)
	c.send("PING")
	c.expect("+PONG")
	testwait.For(t, 10*time.Second, "the read buffer", func() bool { return memOf(t, s).ReadBuf > 0 })
	testwait.For(t, 10*time.Second, "the buffer given back", func() bool { return memOf(t, s).ReadBuf == 0 })
	c.send("PING")
	c.expect("+PONG")
}
