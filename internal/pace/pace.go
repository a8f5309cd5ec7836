// Package pace spaces the looks of a background loop that polls for work:
// every Busy while its looks find some, and after each look that finds none
// twice as long as the wait before, up to Idle. An idle node then wakes a
// few times a second instead of tens or hundreds, and work that comes back
// is seen within the current wait; a loop that can be told of new work (a
// channel) looks at once and starts again from Busy.
package pace

import "time"

// Pace is the wait between a loop's looks. Its zero value is unusable: set
// Busy and Idle (Idle at least Busy).
type Pace struct {
	Busy, Idle time.Duration
	wait       time.Duration
}

// Next returns the wait before the next look, given whether the last one
// found work.
func (p *Pace) Next(found bool) time.Duration {
	if found || p.wait == 0 {
		p.wait = p.Busy
	} else {
		p.wait = min(2*p.wait, p.Idle)
	}
	return p.wait
}
