package commands

import "time"

func multi(c *Ctx) {
	if c.st.multi != nil {
		c.W.Error(errNested)
		return
	}
	c.st.multi = &multiState{}
	c.Conn.SetMulti(0)
	c.W.OK()
}

func discard(c *Ctx) {
	if c.st.multi == nil {
		c.W.Error(errDiscardNoMult)
		return
	}
	c.endMulti()
	c.W.OK()
}

// endMulti leaves MULTI and forgets the watched keys, as EXEC and DISCARD do.
func (c *Ctx) endMulti() { c.srv.endMulti(c.Conn, c.st) }

// exec runs the queued commands as one atomic step: the shards of all their
// keys (and of the watched keys) are locked together, in order, and every
// command sees the same instant.
func exec(c *Ctx) {
	m := c.st.multi
	if m == nil {
		c.W.Error(errExecNoMulti)
		return
	}
	if m.bad {
		c.endMulti()
		c.W.Error(errExecAbort)
		return
	}
	s := c.srv
	locks := &c.st.locks // empty: EXEC itself has no keys
	c.st.watch.AddLocks(s.store, locks)
	for i, spec := range m.specs {
		s.addLocks(locks, c.st, spec, m.queue[i])
	}
	s.store.Lock(locks)
	if c.st.watch.Dirty() || c.Tx.WatchExpired(&c.st.watch) {
		c.W.NullArray()
	} else {
		// The user's rules may have changed since the commands were
		// queued: Redis checks each again and refuses those no longer
		// allowed, on their own.
		rules := c.st.user.rules.Load()
		c.W.Array(len(m.queue))
		for i, spec := range m.specs {
			c.Args = m.queue[i]
			if d := rules.check(spec, c.Args); d != permitted {
				c.W.Error(d.execReply())
				continue
			}
			s.run(c, spec, time.Now())
		}
	}
	s.store.Unlock(locks)
	locks.Reset() // the dispatcher unlocks this set again: leave it empty
	c.endMulti()
}

func watch(c *Ctx) {
	if c.st.multi != nil {
		c.W.Error(errWatchInMulti)
		return
	}
	for _, k := range c.Args[1:] {
		c.Tx.Watch(&c.st.watch, c.DB(), k)
	}
	c.W.OK()
}

func unwatch(c *Ctx) {
	c.srv.unwatch(c.st)
	c.W.OK()
}
