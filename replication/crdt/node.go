package crdt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/internal/pace"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/store"
)

// Defaults of Config.
const (
	DefaultSyncInterval = 5 * time.Millisecond
	DefaultMaxSkew      = 100 * time.Millisecond
	DefaultKeepalive    = time.Second
)

// Linger is how long a string's tombstone (a DEL, or a TTL that passed)
// stays after every node has seen it. A node that has dropped it counts a
// new INCR from a fresh key's register, which loses to the tombstone on a
// node still holding it: the write would be lost there. Dropping a minute
// after the whole mesh knew the tombstone leaves that only to a write made
// at the very moment the nodes drop it.
const Linger = time.Minute

// Reconnection backoff: the first retry after minBackoff, doubling up to
// maxBackoff, so a healed link is back within a fraction of a second.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
)

// Config configures a Node. ID, Clock and Transport are required.
type Config struct {
	// ID is this node's id (--node-id), unique in the mesh.
	ID string
	// Peers are the other nodes by id, with their cluster addresses
	// (--peers). An entry with this node's own id is ignored, so every
	// node can be given the same list.
	Peers map[string]string
	// SyncInterval is how often the node ships its changes
	// (--crdt-sync-interval, default 5 ms).
	SyncInterval time.Duration
	// MaxSkew is the largest clock difference tolerated between nodes
	// (--crdt-max-skew, default 100 ms): a peer further off is refused.
	MaxSkew time.Duration
	// Keepalive is the longest a node with nothing to ship waits between
	// two watermark-only batches (default 1 s, at least SyncInterval): on
	// an idle mesh, how far behind a peer's lag_ms may fall (cutLoop).
	Keepalive time.Duration
	// Incarnation is this start's incarnation: it must differ from every
	// earlier start's of this id (the server keeps it in the data folder
	// and raises it on every start).
	Incarnation uint64
	Clock       clock.Clock
	Transport   Transport
	Logger      *slog.Logger
	// CheckAddr, if set, refuses a peer address CRDT PEER ADD is given
	// that the transport could never dial (the server checks --peers with
	// the same function before it starts the node).
	CheckAddr func(addr string) error
}

// ErrConfig is returned by Start for unusable settings.
var ErrConfig = errors.New("crdt: invalid configuration")

// Validate checks the settings and fills in the defaults.
func (c *Config) Validate() error {
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = DefaultMaxSkew
	}
	if c.Keepalive == 0 {
		c.Keepalive = DefaultKeepalive
	}
	c.Keepalive = max(c.Keepalive, c.SyncInterval)
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: --node-id is required", ErrConfig)
	case c.SyncInterval < 0 || c.SyncInterval > time.Second:
		return fmt.Errorf("%w: --crdt-sync-interval must be between 1ms and 1s", ErrConfig)
	case c.MaxSkew < 0:
		return fmt.Errorf("%w: --crdt-max-skew must not be negative", ErrConfig)
	}
	seen := map[mstate.Origin]string{mstate.NewOrigin(c.ID, 0): c.ID}
	for _, id := range slices.Sorted(maps.Keys(c.Peers)) {
		if id == c.ID {
			continue
		}
		if err := checkPeer(id, c.Peers[id], seen); err != nil {
			return err
		}
	}
	return nil
}

// checkPeer refuses an empty id or address, and an id whose hash (its
// origin's node part) is another's: they would write the same slots.
func checkPeer(id, addr string, seen map[mstate.Origin]string) error {
	o := mstate.NewOrigin(id, 0)
	switch {
	case id == "" || addr == "":
		return fmt.Errorf("%w: a peer needs an id and an address", ErrConfig)
	case seen[o] != "":
		return fmt.Errorf("%w: node ids %q and %q hash alike; rename one", ErrConfig, seen[o], id)
	}
	seen[o] = id
	return nil
}

// Node is one node of an active-active mesh over a store. Commands decide
// on the store at once (package commands, with the node as its Mesh); the
// node ships what they changed to its peers every SyncInterval and merges
// what the peers ship. Safe for concurrent use.
type Node struct {
	cfg    Config
	store  *store.Store
	origin mstate.Origin
	log    *slog.Logger

	// last is the newest watermark handed out: no stamp is earlier from
	// then on (Now).
	last atomic.Int64
	// complete is the node's completeness bound as of the last cut
	// (Bounds).
	complete atomic.Int64
	// sent is the newest watermark put on a link, MinInt64 before the
	// first: no peer has a newer one of this node (Bounds).
	sent atomic.Int64

	mu    sync.Mutex
	peers map[string]*peer
	// changes are the writes made here since the last cut, in the order
	// they were made (a key written twice is shipped as last written).
	changes []change
	// keys holds the changes' keys, one after the other, instead of an
	// allocation per write.
	keys []byte
	// spare are the changes, keys and entries of the cut before the last,
	// for the next: a busy node writes thousands of keys per cut, and
	// fresh buffers for them each time were a third of its garbage. Only
	// the cut touches them.
	spare struct {
		changes []change
		keys    []byte
		entries []entry
	}
	// delivered is the least completeness bound the peers reported:
	// every peer knows every write of this node before it. A key holding
	// a write of this node made at or after it does not expire (hold).
	delivered int64
	// stable is the least completeness bound of the whole mesh, this
	// node's included: every node knows every write stamped before it.
	stable int64
	// heard is whether a peer's batch with entries was merged since the
	// last cut: the writer waits for this node's watermark to fold them.
	heard bool
	// idle is whether the last cut found nothing to ship: the cut loop
	// then waits for wake (wakeLocked) or a slower timer.
	idle bool
	wake chan struct{}

	ln     Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// change is a key's state and expiry (Unix ms) as written here.
type change struct {
	db       int
	key      []byte // in Node.keys
	state    []byte
	expireMs int64
	order    int // its place among the changes, set by latest
}

// record adds a change. The caller holds mu.
func (n *Node) record(db int, key, state []byte, expireMs int64) {
	start := len(n.keys)
	n.keys = append(n.keys, key...)
	end := len(n.keys)
	n.changes = append(n.changes, change{db: db, key: n.keys[start:end:end], state: state, expireMs: expireMs})
}

// peer is another node of the mesh, as this one knows it. Guarded by the
// node's mu.
type peer struct {
	id, addr string
	// link is the connection this node's batches go out on; nil while down.
	link *link
	// watermark is the newest whole-batch watermark received from it:
	// every event it stamped before is here. MinInt64 until the first.
	watermark int64
	// complete is the completeness bound it last reported.
	complete int64
	// in are its open connections to this node.
	in map[Conn]struct{}
	// problem is why the last attempt to reach it failed, logged once.
	problem string
	stop    context.CancelFunc
}

// link is an outgoing connection: the cut puts frames on queue, shared by
// every link, and a goroutine numbers and sends them. fresh links get a full
// sync first.
type link struct {
	conn   Conn
	queue  chan []byte
	fresh  bool
	closed chan struct{}
	once   sync.Once
}

func (l *link) close() { l.once.Do(func() { close(l.closed); l.conn.Close() }) }

// queueFrames is how many frames a link holds for its sender: beyond, the
// peer is too slow and the link is dropped (it comes back with a full sync).
const queueFrames = 1024

// Start starts a node over st: it listens, dials its peers and ships its
// changes until Close.
func Start(cfg Config, st *store.Store) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := cfg.Transport.Listen()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, store: st, origin: mstate.NewOrigin(cfg.ID, cfg.Incarnation),
		log:   cfg.Logger.With("crdt", cfg.ID),
		peers: map[string]*peer{},
		wake:  make(chan struct{}, 1),
		ln:    ln,
	}
	n.last.Store(math.MinInt64)
	n.complete.Store(mstate.NoBound)
	n.sent.Store(math.MinInt64)
	st.SetHold(n.hold)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	for id, addr := range cfg.Peers {
		if id != cfg.ID {
			n.addPeer(id, addr)
		}
	}
	// The bounds hold keeps keys by, before the first cut: a node alone
	// holds nothing, one with peers everything it writes.
	n.release(n.completeness())
	n.wg.Add(2)
	go n.accept()
	go n.cutLoop()
	return n, nil
}

// Close stops the node: its connections close, and nothing more is shipped
// or merged.
func (n *Node) Close() error {
	n.cancel()
	err := n.ln.Close()
	n.mu.Lock()
	for _, p := range n.peers {
		if p.link != nil {
			p.link.close()
		}
	}
	n.mu.Unlock()
	n.wg.Wait()
	return err
}

// Origin is who this node writes as: its id in this incarnation.
func (n *Node) Origin() mstate.Origin { return n.origin }

// MaxSkew is the tolerated clock difference, in ns.
func (n *Node) MaxSkew() int64 { return n.cfg.MaxSkew.Nanoseconds() }

// Now is the instant for a command that holds its keys' locks: the clock,
// but never before a watermark already sent, so the promise a watermark
// makes (no event of this node is stamped earlier) holds even when the
// clock steps back.
func (n *Node) Now() int64 {
	now := n.cfg.Clock.Now()
	if l := n.last.Load(); now < l {
		return l
	}
	return now
}

// SetInstant moves the node's time to t, even back (DEBUG CLOCK SET). Its
// earlier watermarks promised its peers no stamp before them: moving back
// is for setting up a test's timeline before its traffic.
func (n *Node) SetInstant(t int64) { n.last.Store(t) }

// Bounds are what a command deciding here may fold and coarsen
// (mstate.Limiter.Decide).
//
// Complete is the node's completeness bound: it holds every event stamped
// before it that any member will make, so a command folds a debt log's
// events before it. Nodes fold only what they write: a key's states from
// every writer still join into the same bytes everywhere (a folded state is
// above the unfolded one in the join), with no pass over the keys to fold
// them.
//
// Unfolded bounds what any node has folded of this node's events: a peer
// folds below its own completeness bound, which is at most the newest
// watermark of this node it has, less the skew margin (completeness); so
// nothing from sent less MaxSkew on. Every node of a mesh has the same
// --crdt-max-skew (the handshake refuses another). A node with peers that
// never sent a watermark merges none until its first batch goes out (the
// bound needs a watermark to stand on).
//
// A node alone that never sent anything knows every event there is, and
// nobody else holds its events: it folds everything before the decision, so
// a one-node mesh decides exactly as a single node, whatever the rate.
func (n *Node) Bounds() mstate.Bounds {
	sent := n.sent.Load()
	if sent == math.MinInt64 && n.Alone() {
		return mstate.Bounds{Complete: math.MaxInt64, Unfolded: mstate.NoBound}
	}
	b := mstate.Bounds{Complete: n.complete.Load(), Unfolded: mstate.Fixed}
	if sent != math.MinInt64 {
		b.Unfolded = max(sent, math.MinInt64+n.MaxSkew()) - n.MaxSkew()
	}
	return b
}

// advance takes the watermark of a cut: Now, recorded as the floor of every
// later stamp.
func (n *Node) advance() int64 {
	for {
		l := n.last.Load()
		now := max(n.cfg.Clock.Now(), l)
		if n.last.CompareAndSwap(l, now) {
			return now
		}
	}
}

// Changed records that a command stored state under key with expireMs:
// the next cut ships it. The caller holds the key's shard lock and does
// not modify state afterwards (the store holds the same bytes). A node
// without peers records nothing: a peer added later gets a full sync.
func (n *Node) Changed(db int, key, state []byte, expireMs int64) {
	n.mu.Lock()
	if len(n.peers) > 0 {
		n.record(db, key, state, expireMs)
		n.wakeLocked()
	}
	n.mu.Unlock()
}

// wakeLocked has an idle cut loop cut at once: there is something to ship
// (a change, a link that needs its full sync) or a watermark a peer waits
// for. A busy loop cuts on its timer anyway, so a write pays no channel
// operation. The caller holds mu.
func (n *Node) wakeLocked() {
	if n.idle {
		n.idle = false
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// Alone reports whether the node has no peers.
func (n *Node) Alone() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.peers) == 0
}

// hold reports whether a key must outlive its expiry (see store.SetHold):
// it holds an admission of this node that some peer may not have yet
// (the others' view of the key still counts it), or it is a string's
// tombstone or a reset's mark that some node may not have seen (it must
// keep older writes, or the history the reset forgave, from coming back
// there; a string written here that expires is one).
// It reads the state's bytes, so writes need no bookkeeping: only this
// node folds its own events, and a write always leaves its newest one.
func (n *Node) hold(_ int, _ []byte, v store.Value) bool {
	n.mu.Lock()
	delivered, stable := n.delivered, n.stable
	n.mu.Unlock()
	if at, err := mstate.Newest(v.Bytes, n.origin); err == nil && at >= delivered {
		return true
	}
	if k, _ := mstate.KindOf(v.Bytes); k != mstate.Str {
		mark, err := mstate.Mark(v.Bytes)
		return err == nil && mark != mstate.NoMark && lingers(mark, stable)
	}
	stamp, ok, err := mstate.StrTombstone(v.Bytes, n.Now())
	return err == nil && ok && lingers(stamp, stable)
}

// lingers reports whether a tombstone or mark stamped at must stay when
// every node knows every write stamped before stable: until Linger after
// that passed it (and for ever while some node has not reported).
func lingers(at, stable int64) bool {
	return stable < math.MinInt64+Linger.Nanoseconds() || at >= stable-Linger.Nanoseconds()
}

// HoldMarks is what a mesh node's store keeps past its expiry until the
// node starts (store.SetHold): every reset's mark, so that loading the data
// folder does not lose one that some node may not have seen (the node
// releases them once they are known everywhere).
func HoldMarks(_ int, _ []byte, v store.Value) bool {
	mark, err := mstate.Mark(v.Bytes)
	return err == nil && mark != mstate.NoMark
}

// release moves the bounds hold keeps keys by. The caller holds mu, and
// complete is this node's completeness bound.
func (n *Node) release(complete int64) {
	n.delivered = math.MaxInt64
	for _, p := range n.peers {
		n.delivered = min(n.delivered, p.complete)
	}
	n.stable = min(n.delivered, complete)
}

// addPeer starts reaching a peer. The caller holds mu or is Start.
func (n *Node) addPeer(id, addr string) {
	ctx, stop := context.WithCancel(n.ctx)
	p := &peer{id: id, addr: addr, watermark: math.MinInt64, complete: math.MinInt64, stop: stop, in: map[Conn]struct{}{}}
	n.peers[id] = p
	n.wg.Add(1)
	go n.dialLoop(ctx, p)
}

// completeness is the node's completeness bound: it knows every event
// stamped before it that any member will make. Each member promised its
// own events up to its watermark; the skew margin keeps a member whose clock
// steps back a little (a restart without its last watermark) from stamping
// under it. MinInt64 while some member has not promised anything. The
// caller holds mu.
func (n *Node) completeness() int64 {
	t := n.last.Load()
	for _, p := range n.peers {
		t = min(t, p.watermark)
	}
	if t < math.MinInt64+n.MaxSkew() {
		return math.MinInt64
	}
	return t - n.MaxSkew()
}

// cutLoop cuts a batch every SyncInterval while the mesh is busy. A cut
// that finds nothing to ship (no change here, no peer's change merged since
// the last, no new link) still sends the watermark, so that peers' bounds
// and lag_ms move, but the next such cut comes twice as late, up to
// Keepalive: an idle node wakes a few times a second instead of 200, and
// the first watermarks after a burst still come quickly (a transport that
// lost the burst's last batch shows the gap to the receiver). A change, a
// peer's change or a new link wakes the loop for a cut at once.
func (n *Node) cutLoop() {
	defer n.wg.Done()
	p := pace.Pace{Busy: n.cfg.SyncInterval, Idle: n.cfg.Keepalive}
	timer := time.NewTimer(n.cfg.SyncInterval)
	defer timer.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-timer.C:
		case <-n.wake:
		}
		// The wait runs from the cut's start, as a ticker's would: a busy
		// node's cuts take milliseconds, and waiting a whole interval
		// after each made its batches that much later (bench/crdt's lag
		// under -P 1 load: p99 20-25 ms instead of 9-12).
		began := time.Now()
		timer.Reset(p.Next(n.cut()) - time.Since(began))
	}
}

// cut ships what changed since the last cut to every connected peer (the
// whole keyspace to a newly connected one), with a watermark, and moves the
// completeness bound the commands fold at. It reports whether the mesh is
// busy: it shipped entries, or merged a peer's since the last cut.
func (n *Node) cut() bool {
	w := n.advance()
	// Every command that read the clock before w holds its shard's lock
	// until it has called Changed: after the barrier, changes has them all.
	n.store.Barrier()
	n.mu.Lock()
	changes, keys := n.changes, n.keys
	n.changes, n.keys = n.spare.changes[:0], n.spare.keys[:0]
	complete := n.completeness()
	n.complete.Store(complete)
	n.release(complete)
	var links []*link
	busy := len(changes) > 0 || n.heard
	for _, p := range n.peers {
		if p.link != nil {
			links = append(links, p.link)
			busy = busy || p.link.fresh
		}
	}
	n.heard, n.idle = false, !busy
	n.mu.Unlock()

	entries := n.latest(n.spare.entries[:0], changes)
	delta := n.frames(entries, w, complete)
	// The frames hold copies: the buffers can serve the cut after next
	// (without the states, which the store may drop meanwhile), unless a
	// burst made them larger than a busy node needs.
	clear(changes)
	clear(entries)
	n.spare.changes, n.spare.keys, n.spare.entries = nil, nil, nil
	if len(changes) <= maxSpare {
		n.spare.changes, n.spare.keys, n.spare.entries = changes, keys, entries
	}
	var full [][]byte
	for _, l := range links {
		frames := delta
		if l.fresh {
			if full == nil {
				full = n.frames(n.readAll(), w, complete)
			}
			frames, l.fresh = full, false
		}
		for _, f := range frames {
			select {
			case l.queue <- f:
			default:
				l.close() // too far behind: it reconnects with a full sync
			}
		}
	}
	if len(links) > 0 {
		n.sent.Store(w)
	}
	return busy
}

// maxSpare is the most changes whose buffers a cut keeps for later ones:
// over a million writes a second at the default interval.
const maxSpare = 1 << 13

// frames cuts entries into batch frames of about batchBytes, every one but
// the last partial; the link's sender fills in seq. No entries is one empty
// frame: the watermark alone.
func (n *Node) frames(entries []entry, w, complete int64) [][]byte {
	var out [][]byte
	for {
		size, i := 0, 0
		for i < len(entries) && (i == 0 || size+entrySize(entries[i]) <= batchBytes) {
			size += entrySize(entries[i])
			i++
		}
		last := i == len(entries)
		out = append(out, batch{seq: 1, watermark: w, complete: complete, partial: !last, entries: entries[:i]}.encode())
		if last {
			return out
		}
		entries = entries[i:]
	}
}

// putSeq writes seq into an encoded batch.
func putSeq(frame []byte, seq uint64) {
	for i := range 8 {
		frame[1+i] = byte(seq >> (8 * i))
	}
}
