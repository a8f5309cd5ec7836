package e2e

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestChurn_FolderShrinks writes 1 million short-lived 100-byte keys, lets them
// expire (on the debug clock, so the sweeper removes them at once) and checks
// that the data folder shrinks back: expired keys leave the disk too.
func TestChurn_FolderShrinks(t *testing.T) {
	if testing.Short() {
		t.Skip("churns 1 million keys")
	}
	const keys, batch = 1_000_000, 5000
	s := start(t, t.TempDir(), "--debug-clock")
	c := s.client(t)
	ctx := context.Background()
	empty := dirSize(t, s.dir)
	// 100 random bytes a key, so the data cannot compress away and the
	// folder grows well past Pebble's fixed floor.
	rnd := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 100)
	for i := 0; i < keys; i += batch {
		p := c.Pipeline()
		for j := i; j < i+batch; j++ {
			for k := range value {
				value[k] = byte(rnd.Uint32())
			}
			p.Do(ctx, "SET", "churn:"+strconv.Itoa(j), string(value), "PX", 1000)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	full := dirSize(t, s.dir)
	do(t, c, "DEBUG", "CLOCK", "ADVANCE", int64(2*time.Second))
	deadline := time.Now().Add(60 * time.Second)
	for do(t, c, "DBSIZE").(int64) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still there 60 s after they expired", do(t, c, "DBSIZE"))
		}
		time.Sleep(50 * time.Millisecond) // polling the sweeper
	}
	// Pebble keeps up to four write-ahead logs of one memtable (4 MiB) for
	// reuse: that floor does not shrink, the keys' data must.
	const walFloor = 20 << 20
	var now int64
	for {
		if now = dirSize(t, s.dir); now <= empty+walFloor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("folder: %d KiB empty, %d KiB full, still %d KiB after the keys expired", empty>>10, full>>10, now>>10)
		}
		time.Sleep(100 * time.Millisecond) // polling the compaction
	}
	t.Logf("folder: %d KiB empty, %d KiB with %d keys, %d KiB after they expired", empty>>10, full>>10, keys, now>>10)
	if full <= empty+walFloor {
		t.Errorf("the folder never grew (%d KiB full): the test measures nothing", full>>10)
	}
}

// dirSize sums the sizes of the files under dir.
func dirSize(t testing.TB, dir string) int64 {
	var n int64
	// Pebble deletes obsolete files while the walk runs: a file gone
	// between listing and stat simply counts for nothing.
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
