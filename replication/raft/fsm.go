package raft

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/resp"
)

// fsm is the replicated state machine: it applies committed entries through
// commands.Server.Apply, the one path that changes the keyspace. Raft calls
// Apply, Snapshot and Restore from one goroutine.
type fsm struct {
	cmds *commands.Server
	// instant is the instant of the last applied entry (Unix ns): entries
	// apply at max(their instant, this), and the node reads the keyspace
	// at it (expiry, DEBUG DIGEST), never at its own clock.
	instant atomic.Int64
	// index is the last applied log index.
	index atomic.Uint64
	w     resp.Writer // the apply's replies, reused

	mu sync.Mutex // guards addrs
	// addrs are the members' RESP addresses by id, from announce entries.
	addrs map[string]string
}

var _ hraft.FSM = (*fsm)(nil)

func newFSM(cmds *commands.Server) *fsm {
	return &fsm{cmds: cmds, addrs: map[string]string{}}
}

// applied is what Apply returns for an entry of commands (the proposer's
// ApplyFuture.Response): their replies, in order, in one buffer.
type applied struct {
	buf  []byte
	ends []int // reply i is buf[ends[i-1]:ends[i]]
}

func (a *applied) reply(i int) []byte {
	start := 0
	if i > 0 {
		start = a.ends[i-1]
	}
	return a.buf[start:a.ends[i]]
}

// Apply applies one committed entry. An entry that does not decode means
// this replica cannot follow the log: it panics rather than diverge.
func (f *fsm) Apply(l *hraft.Log) any {
	defer f.index.Store(l.Index)
	if l.Type != hraft.LogCommand {
		return nil
	}
	kind, instant, payload, err := decodeHeader(l.Data)
	if err != nil {
		panic(fmt.Errorf("log index %d: %w", l.Index, err))
	}
	now := max(instant, f.instant.Load())
	f.instant.Store(now)
	switch kind {
	case kindCommands:
		cmds, err := decodeCommands(payload)
		if err != nil {
			panic(fmt.Errorf("log index %d: %w", l.Index, err))
		}
		res := &applied{ends: make([]int, len(cmds))}
		for i := range cmds {
			f.w.Reset(cmds[i].Proto)
			f.cmds.Apply(now, &cmds[i], &f.w)
			res.buf = append(res.buf, f.w.Bytes()...)
			res.ends[i] = len(res.buf)
		}
		return res
	case kindAnnounce:
		id, rest, err := nextString(payload)
		if err == nil {
			var addr string
			if addr, _, err = nextString(rest); err == nil {
				f.mu.Lock()
				f.addrs[id] = addr
				f.mu.Unlock()
				return nil
			}
		}
		panic(fmt.Errorf("log index %d: %w", l.Index, err))
	}
	panic(fmt.Errorf("log index %d: %w: kind %q", l.Index, errEntry, kind))
}

// addr returns a member's RESP address ("" when it never announced one).
func (f *fsm) addr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addrs[id]
}

// A snapshot is
//
//	[version 1][instant int64 big-endian][member count uvarint]
//	{[id][address]}... [commands.Server snapshot]
//
// with strings as in announce entries. It is built whole in Snapshot, while
// applies wait (they are the only writers, so it is one instant's state),
// and written out in Persist, while applies go on.
const snapshotVersion = 1

// Snapshot implements hraft.FSM.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	now := f.instant.Load()
	b := append([]byte{snapshotVersion}, make([]byte, 8)...)
	binary.BigEndian.PutUint64(b[1:], uint64(now))
	f.mu.Lock()
	b = binary.AppendUvarint(b, uint64(len(f.addrs)))
	for _, id := range slices.Sorted(maps.Keys(f.addrs)) {
		b = appendString(appendString(b, id), f.addrs[id])
	}
	f.mu.Unlock()
	return snapshot(f.cmds.AppendSnapshot(b, now)), nil
}

// Restore implements hraft.FSM: it replaces the whole state with the
// snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) < 9 || b[0] != snapshotVersion {
		return fmt.Errorf("raft: snapshot: %w", errEntry)
	}
	now := int64(binary.BigEndian.Uint64(b[1:9]))
	rest := b[9:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)) {
		return fmt.Errorf("raft: snapshot: %w", errEntry)
	}
	rest = rest[w:]
	addrs := make(map[string]string, n)
	for range n {
		var id, addr string
		if id, rest, err = nextString(rest); err == nil {
			addr, rest, err = nextString(rest)
		}
		if err != nil {
			return fmt.Errorf("raft: snapshot: %w", err)
		}
		addrs[id] = addr
	}
	if err := f.cmds.RestoreSnapshot(rest, now); err != nil {
		return fmt.Errorf("raft: snapshot: %w", err)
	}
	f.mu.Lock()
	f.addrs = addrs
	f.mu.Unlock()
	f.instant.Store(now)
	return nil
}

// snapshot is a state built by fsm.Snapshot.
type snapshot []byte

func (s snapshot) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}

// seed makes the keyspace f's commands server holds (a backup it loaded)
// the first state of a new group whose configuration is conf: a snapshot at
// index 1 of term 1, where BootstrapCluster would write conf as the first
// entry over an empty state. Raft starts from it as from any snapshot, and
// sends it to members that join later (its index is in no log).
func seed(f *fsm, parts Parts, conf hraft.Configuration) error {
	snap, err := f.Snapshot()
	if err != nil {
		return err
	}
	sink, err := parts.Snaps.Create(hraft.SnapshotVersionMax, 1, 1, conf, 1, parts.Trans)
	if err != nil {
		return err
	}
	if err := snap.Persist(sink); err != nil {
		return err
	}
	// The term the snapshot belongs to, as BootstrapCluster records it.
	return parts.Stable.SetUint64([]byte("CurrentTerm"), 1)
}
