package commands

import (
	"errors"
	"math"
	"strings"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// Active-active replication (--replication crdt): how commands run when the
// node is one of a mesh.
//
// Every command still runs here and now, through the same Spec.Run as on a
// single node; what changes is the state a key holds. A rate-limit key holds
// a mergeable state (package replication/crdt/mstate, store.KindMerged)
// that this node decides on as its own origin and other nodes' states join
// into; the command tells the mesh which key it changed (Mesh.Changed) and
// the mesh ships it. A command whose effect could not be merged is refused.

// A Mesh is the active-active mode of a node (package replication/crdt
// implements it).
type Mesh interface {
	// Origin is who this node writes as.
	Origin() mstate.Origin
	// Now is a command's instant, read once it holds its keys' locks: the
	// mesh promises peers that no later stamp is earlier than a watermark
	// it has sent.
	Now() int64
	// SetInstant is called when DEBUG CLOCK SET or ADVANCE moves the
	// debug clock: the node's time is t from now on, even if that is
	// earlier than a watermark it has sent.
	SetInstant(t int64)
	// MaxSkew is the tolerated clock difference between nodes, in ns.
	MaxSkew() int64
	// Bounds are what a command's Decide may fold and coarsen
	// (mstate.Bounds): the debt log it writes stays short.
	Bounds() mstate.Bounds
	// Changed records that the command stored state under key, expiring
	// at expireMs (Unix ms, 0 for none); the caller holds the key's shard
	// lock and leaves state as it is (the store holds the same bytes).
	Changed(db int, key, state []byte, expireMs int64)
	// Alone reports whether the node has no peers: nothing it deletes can
	// come back, so it may delete as a single node does.
	Alone() bool
	// Command runs a CRDT subcommand (args[0] is "CRDT").
	Command(args [][]byte, w *resp.Writer)
	// AppendInfo appends INFO replication's lines to b.
	AppendInfo(b []byte) []byte
}

// SetMesh makes the server run as a node of m. Call it before the server
// takes connections.
func (s *Server) SetMesh(m Mesh) { s.mesh = m }

// CRDT subcommand [arg ...]: the mesh answers it.
func crdtCmd(c *Ctx) {
	if c.srv.mesh == nil {
		c.W.Error("ERR This instance has CRDT replication disabled (start it with --replication crdt)")
		return
	}
	c.srv.mesh.Command(c.Args, c.W)
}

// meshRefusal is the error for a command a mesh node cannot run, "" for
// the others: a node with peers cannot flush a database, as the peers would
// bring the keys back. (Every other write has a mergeable form: see
// keyspace.go; a rate-limit key cannot be deleted there either, which
// keyRefusal checks key by key.) A node alone flushes as a single node.
func (s *Server) meshRefusal(spec *Spec) string {
	if s.mesh == nil || spec.Flags&Write == 0 {
		return ""
	}
	if spec.Name == "quota.lease" || spec.Name == "quota.return" {
		return "ERR " + strings.ToUpper(spec.Name) + " is not supported with CRDT replication: a lease's return credits units back, which per-origin states cannot merge idempotently (use a Raft cluster or a single node)"
	}
	if (spec.Name == "flushdb" || spec.Name == "flushall") && !s.mesh.Alone() {
		return "ERR " + strings.ToUpper(spec.Name) + " is not supported on a node with CRDT peers: the other nodes would send the keys back"
	}
	return ""
}

// mergedTypeName is what TYPE says of a mergeable state: the command
// prefix of its algorithm ("cl", "fwc", ...).
func mergedTypeName(v store.Value) string {
	k, err := mstate.KindOf(v.Bytes)
	if err != nil {
		return "none"
	}
	return k.String()
}

// typeName is what TYPE says of a value.
func typeName(v store.Value) string {
	if v.Kind == store.KindMerged {
		return mergedTypeName(v)
	}
	return v.Kind.TypeName()
}

// mergedKind is the mergeable algorithm of l.
func (l *limit) mergedKind() mstate.Kind {
	if l.fam == nil {
		return mstate.GCRA
	}
	return mstate.Kind(l.eng.Kind())
}

// loadMerged reads the key's mergeable state; an error is the reply text.
func (l *limit) loadMerged(c *Ctx) string {
	v, ok := c.Tx.Get(c.DB(), l.key)
	l.exists = ok
	if !ok {
		return ""
	}
	want := l.mergedKind()
	if v.Kind != store.KindMerged {
		return errWrongType
	}
	switch k, err := mstate.KindOf(v.Bytes); {
	case err != nil:
		return engineError(err)
	case k == mstate.Marker:
		// A reset's bare mark: a fresh key of any kind, which Decide
		// starts after the reset.
		l.exists = false
	case k == want:
	case want == mstate.GCRA || k == mstate.GCRA || k == mstate.Str:
		// A CL.THROTTLE key is a string, as on a single node.
		return errWrongType
	default:
		return errWrongType + " (the key holds " + k.String() + " state, not " + want.String() + ")"
	}
	l.state = v.Bytes
	return ""
}

// checkMerged decides the request on the mergeable state as this node's
// origin, keeping what commit stores; an error is the reply text.
func (l *limit) checkMerged(c *Ctx) string {
	m := c.srv.mesh
	var lim mstate.Limiter
	var err error
	if l.fam == nil {
		lim, err = mstate.NewGCRA(l.gp)
	} else {
		lim, err = mstate.New(l.eng, m.MaxSkew())
	}
	if err == nil {
		l.merged, err = lim.Decide(l.state, m.Origin(), c.Tx.Now(), l.qty, m.Bounds())
		l.res = l.merged.Res
	}
	switch {
	case err == nil:
		return ""
	case l.fam == nil && !errors.Is(err, engines.ErrCorruptState):
		return cellError(err)
	}
	return engineError(err)
}

// commitMerged stores what checkMerged decided and tells the mesh. The key
// lives until the state is full: for a window kind, or longer if a merge
// said so.
func (l *limit) commitMerged(c *Ctx) {
	d := &l.merged
	if !d.Write {
		return
	}
	db := c.DB()
	exp := store.ExpiryAt(d.FullAt)
	if d.Expiry != math.MinInt64 {
		// A debt log's expiry follows from its bytes, as on the nodes
		// that merge it.
		exp = store.ExpiryAt(d.Expiry)
	} else if old, ok := c.Tx.ExpireMs(db, l.key); ok && l.exists {
		exp = max(exp, old)
	}
	c.Tx.Put(db, l.key, store.Value{Kind: store.KindMerged, Bytes: d.Next}, exp)
	c.srv.mesh.Changed(db, l.key, d.Next, exp)
}
