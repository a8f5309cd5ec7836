package mstate

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomised tests; 0 picks a new one each run")

// newRand returns the test's random source. The seed is new on every run
// unless -seed gives it; a failing test prints the command that replays it.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: go test -run '^%s$' -seed %d ./replication/crdt/mstate/", t.Name(), seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
