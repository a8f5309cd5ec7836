package persistence

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/store"
)

// crashDirEnv, when set, makes TestCrash_AlwaysKeepsAcknowledged the child:
// it writes to the folder it names until it is killed.
const crashDirEnv = "THROTTLED_PERSISTENCE_CRASH_DIR"

const crashWriters = 4

// TestCrash_AlwaysKeepsAcknowledged runs a child process (this test binary)
// that writes under Always and prints each change once WaitDurable returned
// for it, kills it with SIGKILL mid-stream, and checks that every printed
// change is in the folder: nothing acknowledged is lost, and each key's
// last acknowledged value is there or a later one.
func TestCrash_AlwaysKeepsAcknowledged(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash_AlwaysKeepsAcknowledged$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	cmd.Stderr = testlog.Writer{T: t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// Kill once enough is acknowledged; the pipe still holds what the child
	// printed before it died, all of which was acknowledged.
	const killAfter = 10_000
	acked := map[string]int64{} // key -> its last acknowledged value
	lines, killed := 0, false
	timeout := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timeout.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var key string
		var v int64
		if _, err := fmt.Sscanf(sc.Text(), "ack %s %d", &key, &v); err != nil {
			continue // the testing package's own output
		}
		acked[key] = max(acked[key], v)
		lines++
		if lines == killAfter && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the child stopped after %d acknowledgements, before it was killed", lines)
	}

	d := openT(t, dir, No)
	got := loadAll(t, d, nowMs)
	for key, v := range acked {
		r, ok := got["0/"+key]
		switch {
		case !ok:
			t.Errorf("acknowledged key %s (value %d) lost", key, v)
		case r.v.Kind != store.KindInt || r.v.Int < v:
			t.Errorf("key %s = %v, want at least its acknowledged value %d", key, r, v)
		}
	}
	t.Logf("%d acknowledged changes before the kill, %d keys checked, %d keys on disk", lines, len(acked), len(got))
}

// crashChild writes until killed: each writer sets its own keys u/w/i once
// (value i) and its counter c/w to i, waits for durability, then prints both.
func crashChild(dir string) {
	d, err := Open(Options{Dir: dir, Fsync: Always})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go func() { // never outlive a parent that died without killing us
		time.Sleep(time.Minute)
		os.Exit(3)
	}()
	var mu sync.Mutex // keeps lines whole
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Go(func() {
			for i := int64(1); ; i++ {
				unique, counter := fmt.Sprintf("u/%d/%d", g, i), fmt.Sprintf("c/%d", g)
				d.Set(0, []byte(unique), store.IntValue(i), 0)
				d.Set(0, []byte(counter), store.IntValue(i), 0)
				if err := d.WaitDurable(d.LastSeq()); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(w, "ack %s %d\nack %s %d\n", unique, i, counter, i)
				// Flushed with the lock held, so a line is written only
				// after its change is durable, and whole.
				_ = w.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait() // never returns: the parent kills us
}
