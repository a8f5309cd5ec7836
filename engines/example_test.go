package engines_test

import (
	"fmt"

	"github.com/throttleddb/throttled/engines"
)

// The command layer's sequence for LB.THROTTLE key 2 1 1 (capacity 2, one per
// second), times converted to ns: validate the arguments, then per call Check,
// and Commit when allowed, storing the new state until fullAt.
func ExampleApply() {
	l, err := engines.NewLB(2, 1, 1_000_000_000) // 2 may wait, one leaves per second
	if err != nil {
		fmt.Println(err)
		return
	}
	var state []byte // the key does not exist
	for _, now := range []int64{0, 0, 0, 0, 1_500_000_000} {
		res, next, fullAt, write, err := engines.Apply(l, state, now, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("at %.1fs: limited %v, remaining %d/%d, retry_after %d, delay %.1fs",
			float64(now)/1e9, res.Limited, res.Remaining, res.Limit, res.RetryAfter, float64(res.Delay)/1e9)
		if write {
			state = next
			fmt.Printf(", key expires at %.1fs", float64(fullAt)/1e9)
		}
		fmt.Println()
	}
	// Output:
	// at 0.0s: limited false, remaining 2/3, retry_after -1, delay 0.0s, key expires at 1.0s
	// at 0.0s: limited false, remaining 1/3, retry_after -1, delay 1.0s, key expires at 2.0s
	// at 0.0s: limited false, remaining 0/3, retry_after -1, delay 2.0s, key expires at 3.0s
	// at 0.0s: limited true, remaining 0/3, retry_after 1000000000, delay 0.0s
	// at 1.5s: limited false, remaining 0/3, retry_after -1, delay 1.5s, key expires at 4.0s
}
