//go:build !linux

package resp

// loopState is empty where there are no event loops.
type loopState struct{}

// newPoller returns nil: every connection gets a goroutine of its own.
func newPoller(*Server) (poller, error) { return nil, nil }
