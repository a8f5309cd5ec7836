package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/throttleddb/throttled/store"
)

// When a checkpoint is due (see the package doc).
const (
	// checkpointLogBytes: this much log written since the last checkpoint.
	// It bounds the log on disk and what a start replays (about a second
	// of work for 64 MB).
	checkpointLogBytes = 64 << 20
	// checkpointGone: this many removed saved keys listed in the store,
	// whose memory the checkpoint frees.
	checkpointGone = 100_000
	// checkpointAge: anything logged, and the last checkpoint this old.
	// Most rate-limit keys live less than that, so a checkpoint seldom
	// has to save them.
	checkpointAge = 10 * time.Second
	// checkpointCheck is how often the checkpointer looks.
	checkpointCheck = 100 * time.Millisecond
	// checkpointChunk is the size at which the saved-copy batch is
	// written out between shards, which bounds its memory: one batch for
	// a whole checkpoint of a million keys left some 90 MB resident
	// (bench/persist). Pebble counts a batch at about 5 times its bytes in
	// a memtable (a skiplist node of some 200 bytes per key), so a chunk
	// is over half a memtable: Pebble queues it as a "large batch",
	// flushed as it is, instead of copying it into the memtable, and
	// stalls the checkpoint while more than 2 memtables' worth wait. Chunks
	// small enough for the memtable (64 KB) were no faster
	// (BenchmarkCheckpoint) and left 1.7 MB more RSS: both memtables then
	// end up written all through, and stay allocated.
	checkpointChunk = 256 << 10
)

// checkpoints runs until ctx is done, checkpointing when one is due.
func (d *DB) checkpoints(ctx context.Context) {
	defer close(d.cpDone)
	t := time.NewTicker(checkpointCheck)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		logged := d.logBytes.Load()
		due := logged >= checkpointLogBytes || d.ks.Gone() >= checkpointGone ||
			(logged > 0 && time.Since(last) >= checkpointAge)
		if !due || d.Err() != nil {
			continue
		}
		if err := d.checkpoint(ctx); err != nil {
			if ctx.Err() == nil {
				d.fail(err)
			}
			return
		}
		last = time.Now()
	}
}

// checkpoint brings the saved copy up to date with what the store changed
// since the last checkpoint and deletes the log segments that copy now
// covers: those of every change already written to the log when it began,
// which it closes so that later changes go to a new one. The saved copy is
// written in chunks and flushed to sstables before a segment goes, so a
// crash in between leaves the log whole, and replaying it over a partly
// updated copy gives the same keyspace (every change carries its key's whole
// value).
//
// Cancelling ctx (Close does, so as not to wait for a long checkpoint)
// stops it after the shard it is writing. The changes it took from the
// store are then only in the log, so no later checkpoint may delete a
// segment: every one after it returns errAborted, and the next start
// replays the whole log over the partly updated copy, as after a crash.
func (d *DB) checkpoint(ctx context.Context) error {
	d.cpMu.Lock()
	defer d.cpMu.Unlock()
	if d.cpAborted {
		return errAborted
	}
	start := time.Now()
	d.segs.mu.Lock()
	logged := d.logBytes.Load()
	upTo := d.applied.Load() // changes up to here are in the log and will be in the copy
	err := d.segs.rotate()
	d.segs.mu.Unlock()
	if err != nil {
		return fmt.Errorf("checkpoint: closing the log segment: %w", err)
	}
	w := saver{ctx: ctx, b: d.pdb.NewBatch()}
	defer func() { _ = w.b.Close() }()
	if err := d.ks.Collect(&w); err != nil {
		if ctx.Err() != nil {
			d.cpAborted = true
			return errAborted
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := w.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// Pebble has no WAL (see pebbleOptions): what the batches wrote is in
	// its memtables, or in large batches queued for their flush, and a
	// crash would lose it. Flush returns once all of it is in synced
	// sstables named by the synced MANIFEST; only then may the log that
	// also holds these changes go. A checkpoint that wrote nothing (the
	// keys logged since the last one came and went) skips it: what is
	// left unflushed is at most Load's deletions of expired keys, which
	// the next start would make again.
	if w.sets+w.deletes > 0 {
		if err := d.pdb.Flush(); err != nil {
			return fmt.Errorf("checkpoint: flushing the saved copy: %w", err)
		}
	}
	d.segs.mu.Lock()
	err = d.segs.removeUpTo(upTo)
	d.segs.mu.Unlock()
	if err != nil {
		return fmt.Errorf("checkpoint: removing log segments: %w", err)
	}
	d.logBytes.Add(-logged)
	d.dropBuffers()
	d.checkpointCount.Add(1)
	d.lastCheckpoint.Store(time.Now().Unix())
	d.log.Debug("persistence: checkpoint", "saved", w.sets, "deleted", w.deletes, "log_bytes", logged, "took", time.Since(start).Round(time.Millisecond))
	d.compact.add(w.deletes) // what the deletions hide is garbage on disk now
	return nil
}

// errAborted is what checkpoint returns once one was cancelled.
var errAborted = errors.New("checkpoint aborted")

// saver writes what store.Collect hands over into the saved copy.
type saver struct {
	ctx     context.Context // cancelled: stop after this shard
	b       *pebble.Batch
	key     []byte
	sets    int64
	deletes int64
}

var _ store.Collector = (*saver)(nil)

func (w *saver) Flushed(db int) {
	start, end := dbBounds(db)
	_ = w.b.DeleteRange(start, end, nil)
	w.deletes += compactAfter
}

func (w *saver) Removed(db int, key string) {
	w.key = appendKey(w.key[:0], db, key)
	_ = w.b.Delete(w.key, nil)
	w.deletes++
}

func (w *saver) Changed(db int, key string, v store.Value, expireMs int64) {
	op := w.b.SetDeferred(keyHeader+len(key), valueLen(v))
	appendKey(op.Key[:0], db, key)
	appendValue(op.Value[:0], v, expireMs)
	_ = op.Finish() // fails only for indexed batches
	w.sets++
}

func (w *saver) ShardDone() error {
	if w.b.Len() >= checkpointChunk {
		if err := w.b.Commit(pebble.NoSync); err != nil {
			return err
		}
		w.b.Reset()
	}
	return w.ctx.Err()
}
