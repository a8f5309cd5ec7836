package commands

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
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
// CLIENT, INFO, CONFIG, DEBUG, RAFT, ACL...) run on the node asked, as before.

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

	// watch marks a WATCH: Args are its keys, and the apply answers their
	// fingerprints instead of running anything.
	watch bool
	// watched are the fingerprints a transaction's keys had when WATCH
	// read them; the apply runs the transaction only if they still do.
	watched []*watchedKey
	// acl are the rules of the client's user (ACL LIST's form, without
	// flags and passwords) for a script or a transaction of a user who may
	// not run everything: their commands are checked as they apply, so
	// every replica needs the same rules ("" for none to check).
	acl string
}

// watchedKey is a key WATCH read on a Raft node: its fingerprint at the
// WATCH's place in the log. A transaction aborts if any of its watched keys
// has another fingerprint when it applies. Redis aborts when a watched key
// is written at all; a Raft node aborts when its value or expiry differs,
// so a write of the same value (or one undone before EXEC) goes unnoticed.
// The fingerprint is filled in when the WATCH's reply arrives; ok says the
// WATCH succeeded.
type watchedKey struct {
	db  int
	key []byte
	fp  [sha1.Size]byte
	ok  bool
}

// fingerprint is a key's value digest and expiry, hashed: what WATCH
// compares on a Raft node (zero for a missing key).
func fingerprint(tx store.Tx, db int, key []byte) [sha1.Size]byte {
	v := tx.DigestValue(db, key)
	exp, _ := tx.ExpireMs(db, key)
	h := sha1.New()
	h.Write(v[:])
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(exp)))
	return [sha1.Size]byte(h.Sum(nil))
}

// A Cluster is the replication mode of a replicated node (package
// replication/raft implements it).
type Cluster interface {
	// Propose hands cmd to the log. done is called exactly once, from any
	// goroutine, with the complete reply in cmd.Proto's encoding: the
	// apply's, or an error when the outcome is known not to have applied
	// (CLUSTERDOWN) or unknown (UNKNOWN). Propose owns cmd and must not
	// block on the network.
	Propose(cmd *Command, done func(reply []byte))
	// Command runs a RAFT subcommand (args[0] is "RAFT") and calls done
	// once, from any goroutine, with its reply in proto's encoding.
	Command(args [][]byte, proto int, done func(reply []byte))
	// Role is this node's place in the group, for ROLE and INFO
	// replication.
	Role() Role
	// AppendInfo appends INFO replication's lines to b.
	AppendInfo(b []byte) []byte
	// AppliedInstant is the instant of the last entry applied: the node
	// reads its keyspace at it (DEBUG DIGEST), never at its own clock.
	AppliedInstant() int64
	// SetInstant is called by the apply of DEBUG CLOCK SET or ADVANCE, on
	// every replica: the cluster's time is now from this entry on, even if
	// that is earlier than the last entry's (as a single node's DEBUG CLOCK
	// SET may move time back).
	SetInstant(now int64)
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
// replicated: whatever reads or writes the keyspace, transactions, the
// script cache (every replica must know a script EVALSHA names; EXISTS
// reads it at its place in the history) and DEBUG CLOCK SET/ADVANCE.
func logged(spec *Spec, args [][]byte) bool {
	switch {
	case spec.Flags&(Write|ReadOnly) != 0:
		return true
	case spec.Name == "exec", spec.Name == "watch":
		return true
	case spec.Name == "script":
		return is(args[1], "LOAD") || is(args[1], "FLUSH") || is(args[1], "EXISTS")
	case spec.Name == "debug":
		// Moving the debug clock moves every member's, so a test's
		// timeline runs through any member (the leader stamps entries
		// with its clock, never earlier than the last entry's).
		return len(args) == 4 && is(args[1], "CLOCK")
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
		for _, w := range st.watched {
			if w.ok {
				cmd.watched = append(cmd.watched, w)
			}
		}
		s.endMulti(c, st)
	} else {
		cmd.Args = copyArgs(args)
	}
	if r := st.user.rules.Load(); !r.unrestricted && (spec.Flags&Script != 0 || spec.Name == "exec") {
		cmd.acl = r.selector
	}
	if spec.Name == "watch" {
		s.proposeWatch(c, st, cmd)
		return
	}
	d := c.Defer()
	s.cluster.Propose(cmd, d.Resolve)
}

// proposeWatch reads the fingerprints of WATCH's keys through the log, so
// they are those at WATCH's place in the history. The connection serves
// nothing else until they are in (a barrier): its EXEC needs them.
func (s *Server) proposeWatch(c *resp.Conn, st *connState, cmd *Command) {
	if st.multi != nil {
		c.W.Error(errWatchInMulti)
		return
	}
	cmd.watch, cmd.Proto = true, 2
	keys := make([]*watchedKey, len(cmd.Args)-1)
	for i, k := range cmd.Args[1:] {
		keys[i] = &watchedKey{db: cmd.DB, key: k}
	}
	// keys are filled in by done, on another goroutine, while the
	// connection waits; st.watched itself is only touched here.
	st.watched = append(st.watched, keys...)
	d := c.DeferBarrier()
	s.cluster.Propose(cmd, func(reply []byte) {
		if !readFingerprints(reply, keys) {
			d.Resolve(reply) // an error: the keys are not watched
			return
		}
		d.Resolve([]byte("+OK\r\n"))
	})
}

// readFingerprints fills keys from a watch apply's reply, an array of one
// raw 20-byte bulk string per key, and reports whether it was one.
func readFingerprints(reply []byte, keys []*watchedKey) bool {
	head := "*" + strconv.Itoa(len(keys)) + "\r\n"
	if !bytes.HasPrefix(reply, []byte(head)) {
		return false
	}
	reply = reply[len(head):]
	const item = len("$20\r\n") + sha1.Size + len("\r\n")
	if len(reply) != len(keys)*item {
		return false
	}
	for i, k := range keys {
		copy(k.fp[:], reply[i*item+len("$20\r\n"):])
		k.ok = true
	}
	return true
}

// Apply runs cmd on this replica at instant now (Unix ns) and appends its
// reply to w, whose protocol the caller sets to cmd.Proto. The replication
// mode calls it for every command of a committed entry, in log order, from
// one goroutine; the same (state, now, cmd) gives the same state and reply
// on every replica.
func (s *Server) Apply(now int64, cmd *Command, w *resp.Writer) {
	st := &s.applying
	st.db = cmd.DB
	st.user = s.acl.all
	if cmd.acl != "" {
		st.user = s.replayUser(cmd.acl)
	}
	switch {
	case cmd.watch:
		s.withKeys(st, now, cmd.Args[1:], nil, func(tx store.Tx) {
			w.Array(len(cmd.Args) - 1)
			for _, k := range cmd.Args[1:] {
				fp := fingerprint(tx, cmd.DB, k)
				w.Bulk(fp[:])
			}
		})
	case cmd.Exec != nil:
		changed := false
		s.withKeys(st, now, nil, cmd.watched, func(tx store.Tx) {
			for _, k := range cmd.watched {
				changed = changed || fingerprint(tx, k.db, k.key) != k.fp
			}
		})
		if changed {
			w.NullArray()
			return
		}
		st.multi = &multiState{queue: cmd.Exec, specs: make([]*Spec, len(cmd.Exec))}
		for i, args := range cmd.Exec {
			st.multi.specs[i] = s.cmds.lookup(args[0])
		}
		s.execute(nil, w, st, s.cmds["exec"], nil, now, time.Now())
	default:
		s.execute(nil, w, st, s.cmds.lookup(cmd.Args[0]), cmd.Args, now, time.Now())
	}
}

// Check refuses a command this node would not have proposed itself: one
// forwarded by another member (RAFT FORWARD) is checked again before it
// goes into the log, as a command no replica can run would stop them all.
func (s *Server) Check(cmd *Command) error {
	if cmd.DB >= s.store.Databases() {
		return errCommand
	}
	if cmd.Exec == nil {
		return s.checkArgs(cmd.Args, true)
	}
	for _, args := range cmd.Exec {
		if err := s.checkArgs(args, false); err != nil {
			return err
		}
	}
	return nil
}

// checkArgs checks one command's name, arity and that it goes through the
// log (or, alone, is a WATCH or an EXEC's).
func (s *Server) checkArgs(args [][]byte, alone bool) error {
	spec := s.cmds.lookup(args[0])
	switch {
	case spec == nil, (spec.Arity > 0 && len(args) != spec.Arity) || len(args) < -spec.Arity:
		return errCommand
	case spec.Name == "exec", spec.Name == "watch" && !alone:
		return errCommand
	case !logged(spec, args):
		return errCommand
	}
	return nil
}

// withKeys runs fn with the shards of keys and of watched locked. The
// fingerprints a transaction checks are read apart from the transaction's
// own locks: between the two nothing can write, as the applying goroutine
// is the only writer of a replica.
func (s *Server) withKeys(st *connState, now int64, keys [][]byte, watched []*watchedKey, fn func(store.Tx)) {
	st.locks.Reset()
	for _, k := range keys {
		st.locks.Add(s.store, k)
	}
	for _, k := range watched {
		st.locks.Add(s.store, k.key)
	}
	s.store.Lock(&st.locks)
	fn(s.store.Tx(now))
	s.store.Unlock(&st.locks)
}

// replayUser returns a user with the rules a Command carries. The applying
// goroutine keeps the users it made, as the same few rules come again and
// again. Rules that do not parse (another version wrote them) allow
// nothing, on every replica alike.
func (s *Server) replayUser(rules string) *User {
	if u := s.replayed[rules]; u != nil {
		return u
	}
	if len(s.replayed) >= maxReplayed {
		clear(s.replayed)
	}
	r := newUserRules()
	for _, op := range strings.Split(rules, " ") {
		if r.apply(op) != nil {
			r = newUserRules()
			break
		}
	}
	u := newUser("", r)
	s.replayed[rules] = u
	return u
}

// maxReplayed bounds the users replayUser keeps.
const maxReplayed = 64

// errCommand is returned for an entry that does not decode: replicas would
// diverge, so the replication mode stops.
var errCommand = errors.New("commands: malformed replicated command")

// commandVersion is the first byte of an encoded Command; flagExec and
// flagWatch are bits of its flags byte.
const (
	commandVersion = 1
	flagExec       = 0x80
	flagWatch      = 0x40
	flagACL        = 0x20
)

// AppendBinary appends cmd's encoding to b:
//
//	[version 1][db uvarint][flags byte]
//	  [length uvarint][rules] when flagACL is set (Command.acl), then
//	  for a command (or a WATCH, flagWatch set): its argument list;
//	  for a transaction (flagExec set): [count uvarint], each command's
//	  argument list, [watched count uvarint] and each watched key as
//	  [db uvarint][length uvarint][key][fingerprint, 20 bytes].
//
// The flags byte holds the reply protocol in its low bits. Every argument
// list is [count uvarint] then [len uvarint][bytes] each.
func (cmd *Command) AppendBinary(b []byte) []byte {
	b = append(b, commandVersion)
	b = binary.AppendUvarint(b, uint64(cmd.DB))
	flags := byte(cmd.Proto)
	switch {
	case cmd.Exec != nil:
		flags |= flagExec
	case cmd.watch:
		flags |= flagWatch
	}
	if cmd.acl != "" {
		flags |= flagACL
	}
	b = append(b, flags)
	if cmd.acl != "" {
		b = binary.AppendUvarint(b, uint64(len(cmd.acl)))
		b = append(b, cmd.acl...)
	}
	if cmd.Exec == nil {
		return appendArgs(b, cmd.Args)
	}
	b = binary.AppendUvarint(b, uint64(len(cmd.Exec)))
	for _, args := range cmd.Exec {
		b = appendArgs(b, args)
	}
	b = binary.AppendUvarint(b, uint64(len(cmd.watched)))
	for _, w := range cmd.watched {
		b = binary.AppendUvarint(b, uint64(w.db))
		b = binary.AppendUvarint(b, uint64(len(w.key)))
		b = append(b, w.key...)
		b = append(b, w.fp[:]...)
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
	cmd.Proto = int(flags &^ (flagExec | flagWatch | flagACL))
	cmd.watch = flags&flagWatch != 0
	if (cmd.Proto != 2 && cmd.Proto != 3) || (cmd.watch && flags&flagExec != 0) {
		return cmd, nil, errCommand
	}
	b = b[2+n:]
	if flags&flagACL != 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l == 0 || l > uint64(len(b)-n) {
			return cmd, nil, errCommand
		}
		cmd.acl = string(b[n : n+int(l)])
		b = b[n+int(l):]
	}
	var err error
	if flags&flagExec == 0 {
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
	if count, n = binary.Uvarint(b); n <= 0 || count > uint64(len(b)) {
		return cmd, nil, errCommand
	}
	b = b[n:]
	for range count {
		db, n := binary.Uvarint(b)
		if n <= 0 || db > 1<<16 {
			return cmd, nil, errCommand
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) || len(b)-n-int(l) < sha1.Size {
			return cmd, nil, errCommand
		}
		w := &watchedKey{db: int(db), key: b[n : n+int(l) : n+int(l)], ok: true}
		copy(w.fp[:], b[n+int(l):])
		cmd.watched = append(cmd.watched, w)
		b = b[n+int(l)+sha1.Size:]
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
	return persistence.AppendSnapshot(dst, s.store, s.store.Tx(now))
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
	return persistence.RestoreSnapshot(s.store, s.store.Tx(now), snap)
}
