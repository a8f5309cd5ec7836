package scripting

import (
	"context"
	"sync/atomic"
	"time"
	"weak"
)

// Run runs s with KEYS and ARGV and writes its reply, or its error, to w in
// the client's protocol. Each redis.call goes to c. keys and argv are copied
// into the script; w is not used after Run returns.
//
// Cancelling ctx stops the script like SCRIPT KILL does: only if it has not
// written yet, with the error "ERR Script aborted: ...". A ctx that cannot be
// cancelled (context.Background) costs nothing; one that can costs an
// allocation per run.
func (e *Engine) Run(ctx context.Context, s *Script, keys, argv [][]byte, c Caller, w Writer) {
	v, _ := e.pool.Get().(*vm)
	if v == nil {
		v = newVM(e)
		e.register(v)
	}
	if e.runOn(ctx, v, s, keys, argv, c, w) {
		e.pool.Put(v)
	}
}

// runOn runs s on v; false means v must be dropped (see vm.run).
func (e *Engine) runOn(ctx context.Context, v *vm, s *Script, keys, argv [][]byte, c Caller, w Writer) bool {
	e.active.Add(1)
	defer e.active.Add(-1)
	e.begin(v, s)
	x := &v.x
	x.caller, x.proto = c, 2
	x.rand.seed(0)
	var stop func() bool
	if ctx.Done() != nil {
		seq := v.seq
		stop = context.AfterFunc(ctx, func() { v.stop(seq, stateAborted, errAborted) })
	}
	sound := v.run(s, keys, argv, w)
	if stop != nil {
		stop()
	}
	x.caller, x.script = nil, nil
	v.start.Store(0)
	v.running.Store(nil)
	return sound
}

// now is the monotonic time since the Engine was made, never 0 (0 marks an
// idle interpreter).
func (e *Engine) now() int64 { return int64(time.Since(e.epoch)) + 1 }

// begin marks v as running s. Interpreters come from a sync.Pool: its
// per-CPU caches keep an interpreter on the core that last used it, without
// a global lock.
func (e *Engine) begin(v *vm, s *Script) {
	if g := e.gen.Load(); v.gen != g {
		clear(v.fns)
		v.gen = g
	}
	v.x.script = s
	// The order matters to Kill and stop (see busyRun): the context is
	// ready for run seq before the state names seq, and the state names seq
	// before the start time is set.
	v.seq++
	v.ctx.reset(v.seq)
	v.x.state.v.Store(v.seq << stateBits)
	v.running.Store(s)
	v.slowLogged.Store(false)
	v.start.Store(e.now())
}

// register adds v to the interpreters Busy and Kill look at. The list holds
// weak pointers so the pool can drop idle interpreters; dead entries are
// removed as new ones come.
func (e *Engine) register(v *vm) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	live := e.reg[:0]
	for _, p := range e.reg {
		if p.Value() != nil {
			live = append(live, p)
		}
	}
	clear(e.reg[len(live):])
	e.reg = append(live, weak.Make(v))
}

// each calls f for every live interpreter.
func (e *Engine) each(f func(v *vm)) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	for _, p := range e.reg {
		if v := p.Value(); v != nil {
			f(v)
		}
	}
}

// busyRun returns the sequence number of v's run when it has run past the
// time limit.
func (v *vm) busyRun(now, limit int64) (uint64, bool) {
	if limit <= 0 {
		return 0, false
	}
	// Read state, start, state: if the run number did not change, start
	// belongs to that run (acquire sets the state before the start).
	s1 := v.x.state.v.Load()
	start := v.start.Load()
	s2 := v.x.state.v.Load()
	if start == 0 || s1>>stateBits != s2>>stateBits || now-start < limit {
		return 0, false
	}
	if s1&(stateKilled|stateAborted) != 0 {
		// Stopped: it ends at its next instruction. For clients it is
		// over, as in Redis once SCRIPT KILL has answered; a command that
		// needs its keys waits for their locks.
		return 0, false
	}
	return s1 >> stateBits, true
}

// Busy reports whether some script has run longer than the time limit and
// is still running. While it is, Redis answers other clients' commands with
// ReplyBusy (except SCRIPT KILL, SHUTDOWN NOSAVE and a few more).
func (e *Engine) Busy() bool {
	// Every command asks; when no script runs the answer costs one load.
	if e.active.Load() == 0 {
		return false
	}
	now, limit := e.now(), e.timeLimit.Load()
	busy := false
	e.each(func(v *vm) {
		if _, ok := v.busyRun(now, limit); !ok {
			return
		}
		busy = true
		if !v.slowLogged.Swap(true) {
			sha := ""
			if s := v.running.Load(); s != nil {
				sha = s.sha
			}
			e.log.Warn("Slow script detected: still in execution after "+itoa((now-v.start.Load())/1e6)+
				" milliseconds. You can try killing the script using the SCRIPT KILL command.", "script", sha)
		}
	})
	return busy
}

// Kill stops every busy script that has not written (SCRIPT KILL). Their
// clients get "ERR Script killed by user with SCRIPT KILL... script: <sha>,
// on @user_script:<line>.". It returns ErrNotBusy when no script is busy and
// ErrUnkillable when every busy script has written.
func (e *Engine) Kill() error {
	now, limit := e.now(), e.timeLimit.Load()
	busy, killed := false, false
	e.each(func(v *vm) {
		seq, ok := v.busyRun(now, limit)
		if !ok {
			return
		}
		switch v.stop(seq, stateKilled, errKilled) {
		case stopWrote:
			busy = true
		case stopDone:
			e.log.Warn("Lua script killed by user with SCRIPT KILL.")
			fallthrough
		case stopAlready:
			busy, killed = true, true
		}
	})
	switch {
	case killed:
		return nil
	case busy:
		return ErrUnkillable
	}
	return ErrNotBusy
}

// stop ends run seq of v for why (killed or aborted) unless it has written
// or already ended.
func (v *vm) stop(seq uint64, why uint64, err error) stopResult {
	r := v.x.state.stop(seq, why)
	if r == stopDone {
		v.ctx.cancel(seq, err)
	}
	return r
}

type stopResult int

const (
	stopOver    stopResult = iota // the run had ended
	stopWrote                     // the run has written: it goes on
	stopAlready                   // the run was already stopping
	stopDone                      // this call stopped the run
)

// runState packs the run number with its wrote/killed/aborted bits, so that
// MarkWrite and stop change it atomically and a stop meant for one run
// cannot hit the next.
type runState struct{ v atomic.Uint64 }

const (
	stateWrote uint64 = 1 << iota
	stateKilled
	stateAborted
	stateBits = 8
)

func (s *runState) flags() uint64 { return s.v.Load() & (1<<stateBits - 1) }

func (s *runState) markWrite() bool {
	for {
		old := s.v.Load()
		if old&(stateKilled|stateAborted) != 0 {
			return false
		}
		if old&stateWrote != 0 || s.v.CompareAndSwap(old, old|stateWrote) {
			return true
		}
	}
}

// stop sets why on run seq unless it wrote.
func (s *runState) stop(seq, why uint64) stopResult {
	for {
		old := s.v.Load()
		switch {
		case old>>stateBits != seq:
			return stopOver
		case old&stateWrote != 0:
			return stopWrote
		case old&(stateKilled|stateAborted) != 0:
			return stopAlready
		case s.v.CompareAndSwap(old, old|why):
			return stopDone
		}
	}
}
