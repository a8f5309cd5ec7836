package persistence

// Stats describes the state of persistence, for INFO persistence and the
// metrics.
type Stats struct {
	// Fsync is the sync policy.
	Fsync FsyncPolicy
	// Pending counts changes appended but not yet written to the log.
	Pending uint64
	// Unsynced counts changes made since the last sync: what a crash of the
	// machine could lose now.
	Unsynced uint64
	// LastSync is when the log was last synced, in Unix seconds.
	LastSync int64
	// GroupCommits counts the group commits written to the log, Syncs the log
	// syncs; under Always changes/Syncs is the group commit's gain.
	GroupCommits, Syncs int64
	// DiskBytes is the space the database takes on disk: Pebble's files,
	// as Pebble counts them, and the log (0 after Close).
	DiskBytes uint64
	// Compactions counts the tombstone compactions run (see the package doc).
	Compactions int64
	// Checkpoints counts the checkpoints done; LogBytes is the log written
	// since the last one began (see the package doc).
	Checkpoints, LogBytes int64
	// LastCheckpoint is when the last checkpoint was done, in Unix seconds
	// (0 before the first).
	LastCheckpoint int64
	// Err is the first write error (see Err).
	Err error
}

// Stats returns the current state.
func (d *DB) Stats() Stats {
	last := d.lastSeq.Load()
	s := Stats{
		Fsync:          d.policy,
		Pending:        last - min(last, d.applied.Load()),
		Unsynced:       last - min(last, d.synced.Load()),
		LastSync:       d.lastSync.Load(),
		GroupCommits:   d.commits.Load(),
		Syncs:          d.syncs.Load(),
		Compactions:    d.compact.runs.Load(),
		Checkpoints:    d.checkpointCount.Load(),
		LogBytes:       d.logBytes.Load(),
		LastCheckpoint: d.lastCheckpoint.Load(),
		Err:            d.Err(),
	}
	d.closeMu.RLock()
	if !d.closed {
		s.DiskBytes = d.pdb.Metrics().DiskSpaceUsage() + uint64(d.segs.bytes.Load())
	}
	d.closeMu.RUnlock()
	return s
}

// Checkpoints returns how many checkpoints have been done.
func (d *DB) Checkpoints() int64 { return d.checkpointCount.Load() }
