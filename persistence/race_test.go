//go:build race

package persistence

// raceEnabled: the race detector slows Pebble down about tenfold, so the
// heaviest tests shrink.
const raceEnabled = true
