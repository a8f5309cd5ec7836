package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The log lives in files of its own, next to Pebble's, in the folder's log
// subfolder: appending a record to a file is the cheapest durable write
// there is, where a Pebble key would also go through its memtable, a flush
// and compactions before the checkpoint deletes it. Each file (a segment)
// is named for the first change it may hold,
//
//	log/00000000000000000001.log
//
// and holds frames, one per log record:
//
//	[length uint32][crc32c of what follows uint32][seq of the record's last change uint64][record]
//
// in little-endian. A checkpoint starts a new segment and, once the saved
// copy is synced, deletes the older ones.
const (
	logDir       = "log"
	segmentExt   = ".log"
	frameHeader  = 4 + 4 + 8
	maxFrameSize = 1 << 30 // a record is sealed at sealAt; this only rejects garbage
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segments writes the log. mu is held by the committer while it writes and
// syncs, and by a checkpoint while it rotates, so that a checkpoint sees
// every record written before it (the DB's applied) in the segments it
// rotates away from.
type segments struct {
	mu    sync.Mutex
	dir   string       // the log subfolder
	f     *os.File     // the segment being appended to; nil until the first write after a rotation
	frame []byte       // reused frame buffer
	bytes atomic.Int64 // bytes in every segment on disk, for Stats
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segmentExt) }

// write appends the frames of recs (the last seq of each in seqs) to the
// current segment, creating one that starts at seqs[0] when there is none,
// and syncs it when sync is set. The caller holds mu.
func (s *segments) write(recs [][]byte, seqs []uint64, first uint64, sync bool) error {
	if s.f == nil {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(s.dir, segmentName(first)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		// The new file's name must survive a crash as well as its data.
		if err := syncDir(s.dir); err != nil {
			_ = f.Close()
			return err
		}
		s.f = f
	}
	s.frame = s.frame[:0]
	for i, rec := range recs {
		s.frame = appendFrame(s.frame, rec, seqs[i])
	}
	if _, err := s.f.Write(s.frame); err != nil {
		return err
	}
	s.bytes.Add(int64(len(s.frame)))
	if cap(s.frame) > 4*sealAt {
		s.frame = nil
	}
	if sync {
		return s.f.Sync()
	}
	return nil
}

// rotate syncs and closes the current segment: the next write starts a new
// one. The caller holds mu.
func (s *segments) rotate() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	return err
}

// removeUpTo deletes every closed segment whose first change is at most upTo
// (they hold nothing newer: the one after each starts later), once a
// checkpoint has saved what they hold. The caller holds mu.
func (s *segments) removeUpTo(upTo uint64) error {
	names, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	current := ""
	if s.f != nil {
		current = filepath.Base(s.f.Name())
	}
	removed := false
	for _, n := range names {
		first, _ := segmentFirst(n)
		if first > upTo || n == current {
			continue
		}
		path := filepath.Join(s.dir, n)
		if fi, err := os.Stat(path); err == nil {
			s.bytes.Add(-fi.Size())
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return syncDir(s.dir)
	}
	return nil
}

// close syncs and closes the current segment.
func (s *segments) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rotate()
}

func appendFrame(dst, rec []byte, seq uint64) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(8+len(rec)))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the checksum, below
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = append(dst, rec...)
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], castagnoli))
	return dst
}

// errTorn marks a segment that ends inside a frame, or with a frame whose
// checksum fails: what a crash in the middle of a write leaves.
var errTorn = errors.New("torn frame")

// nextFrame decodes the frame at the start of b.
func nextFrame(b []byte) (rec []byte, seq uint64, rest []byte, err error) {
	if len(b) < frameHeader {
		return nil, 0, nil, errTorn
	}
	n := binary.LittleEndian.Uint32(b)
	if n < 8 || n > maxFrameSize || int(n) > len(b)-8 {
		return nil, 0, nil, errTorn
	}
	body := b[8 : 8+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, nil, errTorn
	}
	return body[8:], binary.LittleEndian.Uint64(body), b[8+n:], nil
}

// listSegments returns the segment files of dir in order; none when dir does
// not exist.
func listSegments(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, ok := segmentFirst(e.Name()); ok && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // fixed-width numbers sort as strings
	return names, nil
}

// segmentFirst parses a segment's name.
func segmentFirst(name string) (uint64, bool) {
	num, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(num) != 20 {
		return 0, false
	}
	first, err := strconv.ParseUint(num, 10, 64)
	return first, err == nil
}

// readSegments calls fn for every record of the segments in dir, in order.
// A torn frame ends the last segment (a crash cut its write; nothing after it
// was acknowledged under Always, and the file is cut back to its last whole
// frame); anywhere else it is corruption. It returns the bytes the segments
// hold.
func readSegments(dir string, fn func(rec []byte, seq uint64) error) (int64, error) {
	names, err := listSegments(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, n := range names {
		path := filepath.Join(dir, n)
		b, err := os.ReadFile(path)
		if err != nil {
			return total, err
		}
		rest := b
		for len(rest) > 0 {
			rec, seq, r, err := nextFrame(rest)
			if errors.Is(err, errTorn) && i == len(names)-1 {
				good := int64(len(b) - len(rest))
				if err := truncate(path, good); err != nil {
					return total, err
				}
				b = b[:good]
				break
			}
			if err != nil {
				return total, fmt.Errorf("log segment %s at byte %d: %w", n, len(b)-len(rest), err)
			}
			if err := fn(rec, seq); err != nil {
				return total, fmt.Errorf("log segment %s: %w", n, err)
			}
			rest = r
		}
		total += int64(len(b))
	}
	return total, nil
}

func truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir syncs a folder, so that the files created or removed in it stay
// so after a crash.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
