package commands

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// Replication: how a command reaches the keyspace when the node is one of a
// Raft group.
//
// A single node runs each command at once (ServeRESP). With a Cluster
// (SetCluster), every command that reads or changes the keyspace is instead
// handed to it as a Command: the connection's place for the reply is
// deferred, and the reply comes back from Apply, which the replication mode
// calls on every replica, in log order, at the instant stamped into the
// entry. Apply locks the command's shards and runs the same Spec.Run as
// ServeRESP does: there is one path that changes state. Reads go through the
// log too, so they are linearizable: a node that cannot reach a quorum
// answers neither reads nor writes.
//
// Commands about the connection or the node (PING, SELECT, AUTH, HELLO,
// CLIENT, INFO, CONFIG, DEBUG, RAFT...) run on the node asked, as before.

// Command is one client command on its way through the log: what Apply
// needs to run it on any replica, and nothing of the connection beyond that.
type Command struct {
	// DB is the client's selected database.
	DB int
	// Proto is the client's reply protocol (2 or 3): the reply is built by
	// the apply, in the client's encoding.
	Proto int
	// Args is the command and its arguments; nil for a transaction.
	Args [][]byte
	// Exec holds a MULTI/EXEC transaction's queued commands, run as one.
	Exec [][][]byte
}

// A Cluster is the replication mode of a replicated node (package
// replication/raft implements it).
type Cluster interface {
	// Propose hands cmd to the log. done is called exactly once, from any
	// goroutine, with the complete reply in cmd.Proto's encoding: the
	// apply's, or an error when the outcome is known not to have applied
	// (CLUSTERDOWN) or unknown (TRYAGAIN). Propose owns cmd and must not
	// block on the network.
	Propose(cmd *Command, done func(reply []byte))
	// Command runs a RAFT subcommand (args[0] is "RAFT") and calls done
	// once, from any goroutine, with its reply in proto's encoding.
	Command(args [][]byte, proto int, done func(reply []byte))
	// AppendInfo appends INFO replication's lines to b.
	AppendInfo(b []byte) []byte
	// AppliedInstant is the instant of the last entry applied: the node
	// reads its keyspace at it (DEBUG DIGEST), never at its own clock.
	AppliedInstant() int64
}

// SetCluster makes the server send keyspace commands to cl instead of
// running them. Call it before the server takes connections.
func (s *Server) SetCluster(cl Cluster) { s.cluster = cl }

// errNotLogged refuses, inside MULTI on a replicated node, a command that
// does not go through the log: EXEC runs the transaction on every replica,
// where there is no client connection to run it on.
const errNotLogged = "ERR only commands on keys and scripts can be queued in a transaction on a Raft node"

// RAFT subcommand [arg ...]: the replication mode answers it.
func raftCmd(c *Ctx) {
	cl := c.srv.cluster
	if cl == nil {
		c.W.Error("ERR This instance has Raft replication disabled (start it with --replication raft)")
		return
	}
	cl.Command(copyArgs(c.Args), c.W.Proto(), c.Conn.Defer().Resolve)
}

// logged reports whether a command goes through the log when the node is
// replicated: whatever reads or writes the keyspace, transactions, and the
// script cache's changes (every replica must know a script EVALSHA names).
func logged(spec *Spec, args [][]byte) bool {
	switch {
	case spec.Flags&(Write|ReadOnly) != 0:
		return true
	case spec.Name == "exec":
		return true
	case spec.Name == "script":
		return is(args[1], "LOAD") || is(args[1], "FLUSH")
	}
	return false
}

// propose defers c's reply to spec and hands the command to the proposer.
// EXEC hands over the whole transaction, checked here as exec checks it.
func (s *Server) propose(c *resp.Conn, st *connState, spec *Spec, args [][]byte) {
	cmd := &Command{DB: st.db, Proto: c.W.Proto()}
	if spec.Name == "exec" {
		m := st.multi
		switch {
		case m == nil:
			c.W.Error(errExecNoMulti)
			return
		case m.bad:
			s.endMulti(c, st)
			c.W.Error(errExecAbort)
			return
		}
		cmd.Exec = m.queue
		s.endMulti(c, st)
	} else {
		cmd.Args = copyArgs(args)
	}
	d := c.Defer()
	s.cluster.Propose(cmd, d.Resolve)
}

// Apply runs cmd on this replica at instant now (Unix ns) and appends its
// reply to w, whose protocol the caller sets to cmd.Proto. The replication
// mode calls it for every command of a committed entry, in log order, from
// one goroutine; the same (state, now, cmd) gives the same state and reply
// on every replica.
func (s *Server) Apply(now int64, cmd *Command, w *resp.Writer) {
	st := &s.applying
	st.db = cmd.DB
	if cmd.Exec != nil {
		st.multi = &multiState{queue: cmd.Exec, specs: make([]*Spec, len(cmd.Exec))}
		for i, args := range cmd.Exec {
			st.multi.specs[i] = s.cmds.lookup(args[0])
		}
		s.execute(nil, w, st, s.cmds["exec"], nil, now, time.Now())
		return
	}
	s.execute(nil, w, st, s.cmds.lookup(cmd.Args[0]), cmd.Args, now, time.Now())
}

// errCommand is returned for an entry that does not decode: replicas would
// diverge, so the replication mode stops.
var errCommand = errors.New("commands: malformed replicated command")

// commandVersion is the first byte of an encoded Command.
const commandVersion = 1

// AppendBinary appends cmd's encoding to b:
//
//	[version 1][db uvarint][proto byte][n uvarint] then, for a command, its
//	n arguments; for a transaction (n counts its commands, the high bit of
//	the flags byte set), each command's argument list.
//
// Every argument list is [count uvarint] then [len uvarint][bytes] each.
func (cmd *Command) AppendBinary(b []byte) []byte {
	b = append(b, commandVersion)
	b = binary.AppendUvarint(b, uint64(cmd.DB))
	if cmd.Exec == nil {
		b = append(b, byte(cmd.Proto))
		return appendArgs(b, cmd.Args)
	}
	b = append(b, byte(cmd.Proto)|0x80)
	b = binary.AppendUvarint(b, uint64(len(cmd.Exec)))
	for _, args := range cmd.Exec {
		b = appendArgs(b, args)
	}
	return b
}

func appendArgs(b []byte, args [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(args)))
	for _, a := range args {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	return b
}

// DecodeCommand reads one Command from the front of b and returns the rest.
// The arguments alias b.
func DecodeCommand(b []byte) (Command, []byte, error) {
	var cmd Command
	if len(b) < 3 || b[0] != commandVersion {
		return cmd, nil, errCommand
	}
	db, n := binary.Uvarint(b[1:])
	if n <= 0 || db > 1<<16 || len(b) < 2+n {
		return cmd, nil, errCommand
	}
	cmd.DB = int(db)
	flags := b[1+n]
	cmd.Proto = int(flags & 0x7f)
	b = b[2+n:]
	var err error
	if flags&0x80 == 0 {
		cmd.Args, b, err = decodeArgs(b)
		return cmd, b, err
	}
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return cmd, nil, errCommand
	}
	b = b[n:]
	cmd.Exec = make([][][]byte, count)
	for i := range cmd.Exec {
		if cmd.Exec[i], b, err = decodeArgs(b); err != nil {
			return cmd, nil, err
		}
	}
	return cmd, b, nil
}

func decodeArgs(b []byte) ([][]byte, []byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count == 0 || count > uint64(len(b)) {
		return nil, nil, errCommand
	}
	b = b[n:]
	args := make([][]byte, count)
	for i := range args {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, nil, errCommand
		}
		args[i] = b[n : n+int(l) : n+int(l)]
		b = b[n+int(l):]
	}
	return args, b, nil
}

// AppendSnapshot appends the state a replica must hold besides the log:
// the script cache (EVALSHA must find on a restored replica what it finds
// on the others) and the keyspace at instant now:
//
//	[script count uvarint]{[length uvarint][body]}...[keyspace]
//
// with the keyspace in package persistence's snapshot encoding. It holds
// every shard meanwhile; the replication mode calls it between applies.
func (s *Server) AppendSnapshot(dst []byte, now int64) []byte {
	srcs := s.scripts.Sources()
	dst = binary.AppendUvarint(dst, uint64(len(srcs)))
	for _, src := range srcs {
		dst = binary.AppendUvarint(dst, uint64(len(src)))
		dst = append(dst, src...)
	}
	var l store.LockSet
	l.AddAll()
	s.store.Lock(&l)
	defer s.store.Unlock(&l)
	return persistence.AppendSnapshot(dst, s.store.Tx(now), s.store.Databases())
}

// RestoreSnapshot replaces the script cache and the keyspace with those of
// snap, an AppendSnapshot result taken at instant now.
func (s *Server) RestoreSnapshot(snap []byte, now int64) error {
	n, w := binary.Uvarint(snap)
	if w <= 0 || n > uint64(len(snap)) {
		return errCommand
	}
	snap = snap[w:]
	s.scripts.Flush()
	for range n {
		l, w := binary.Uvarint(snap)
		if w <= 0 || l > uint64(len(snap)-w) {
			return errCommand
		}
		if _, err := s.scripts.Load(snap[w : w+int(l)]); err != nil {
			return err
		}
		snap = snap[w+int(l):]
	}
	var l store.LockSet
	l.AddAll()
	s.store.Lock(&l)
	defer s.store.Unlock(&l)
	return persistence.RestoreSnapshot(s.store.Tx(now), s.store.Databases(), snap)
}
