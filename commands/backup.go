package commands

import (
	"errors"
	"strings"

	"github.com/throttleddb/throttled/persistence"
)

// BACKUP <absolute-path>: writes a consistent copy of the keyspace, as of
// the command's instant, as a new data folder at the path; a node started
// with --dir on it (a single node) has the same keys, values and expiry
// times (docs/operations.md, "Backup and restore").
//
// The copy is taken in memory while the command holds every shard (AllKeys:
// one instant, no write half in); the folder is then written by a
// goroutine, and the reply waits for it without holding the event loop or
// any lock. On a Raft member the copy is the member's applied keyspace at
// the last applied entry's instant (as DEBUG DIGEST shows it): take it on
// the leader, or on a member whose /readyz is 200, for the latest state. A
// mesh node refuses it: its keys are merge states tied to its node id,
// which a new node with an empty folder gets back from its peers.
//
// The path must be absolute, must not exist (nor its ".partial" twin), its
// parent must, and it must not overlap the node's own data folder. The
// command is an admin one (@admin @dangerous): it writes where the server
// process can write, so grant it as CONFIG SET dir would be.
func backup(c *Ctx) {
	if c.srv.mesh != nil {
		c.W.Error("ERR BACKUP is not supported on a mesh node: a new node started with an empty folder gets the mesh's state from its peers")
		return
	}
	dir, own := string(c.Args[1]), c.srv.cfg.Settings["dir"]
	if err := persistence.CheckBackupPath(dir, own); err != nil {
		c.W.Error(backupError(err))
		return
	}
	snap := persistence.AppendSnapshot(nil, c.srv.store, c.replicaTx())
	d := c.Conn.Defer()
	log := c.srv.log
	go func() {
		keys, err := persistence.WriteBackup(dir, own, snap, log)
		if err != nil {
			log.Error("backup failed", "dir", dir, "err", err)
			d.Resolve([]byte("-" + backupError(err) + "\r\n"))
			return
		}
		log.Info("backup written", "dir", dir, "keys", keys, "bytes", len(snap))
		d.Resolve([]byte("+OK\r\n"))
	}()
}

// backupError is the error reply for err, on one line.
func backupError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "persistence: ")
	if !errors.Is(err, persistence.ErrBackupPath) {
		msg = "backup failed: " + msg
	}
	return "ERR " + strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
}
