package raft

import (
	"encoding/binary"
	"errors"

	"github.com/throttleddb/throttled/commands"
)

// An entry is the Data of one Raft log entry:
//
//	[version 1][kind byte][instant int64 big-endian][payload]
//
// The instant is the leader's clock when it built the entry (Unix ns); every
// replica applies the entry at max(instant, the last applied instant), so
// time never goes back across leader changes and every replica uses the
// same value. raft.Log.AppendedAt is never used for it: it differs between
// replicas (see ../../shared/reference/raft-notes.md, section 6).
//
// Kinds:
//
//   - kindCommands: many client commands batched into one entry (one fsync
//     and one round trip for all of them): [count uvarint] then each
//     commands.Command's encoding.
//   - kindAnnounce: a member's RESP address, so that every member can name
//     every other's to clients (RAFT MEMBERS, RAFT LEADER):
//     [id length uvarint][id][address length uvarint][address].
const (
	entryVersion = 1
	entryHeader  = 10

	kindCommands byte = 'c'
	kindAnnounce byte = 'a'
)

// errEntry is a log entry this build cannot read. Applying it is impossible
// and skipping it would make this replica diverge, so the FSM panics with it.
var errEntry = errors.New("raft: malformed log entry")

func appendHeader(b []byte, kind byte, instant int64) []byte {
	b = append(b, entryVersion, kind)
	return binary.BigEndian.AppendUint64(b, uint64(instant))
}

func decodeHeader(b []byte) (kind byte, instant int64, payload []byte, err error) {
	if len(b) < entryHeader || b[0] != entryVersion {
		return 0, 0, nil, errEntry
	}
	return b[1], int64(binary.BigEndian.Uint64(b[2:10])), b[entryHeader:], nil
}

// appendString and nextString encode the announce entry's fields.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func nextString(b []byte) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, errEntry
	}
	return string(b[w : w+int(n)]), b[w+int(n):], nil
}

// decodeCommands returns the commands of a kindCommands payload; their
// arguments alias payload.
func decodeCommands(payload []byte) ([]commands.Command, error) {
	n, w := binary.Uvarint(payload)
	if w <= 0 || n > uint64(len(payload)) {
		return nil, errEntry
	}
	payload = payload[w:]
	cmds := make([]commands.Command, n)
	for i := range cmds {
		var err error
		if cmds[i], payload, err = commands.DecodeCommand(payload); err != nil {
			return nil, err
		}
	}
	if len(payload) != 0 {
		return nil, errEntry
	}
	return cmds, nil
}
