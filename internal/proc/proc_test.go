package proc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWaitReady(t *testing.T) {
	calls := 0
	probe := func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}
	if err := WaitReady(t.Context(), "x", 5*time.Second, nil, probe); err != nil || calls != 3 {
		t.Errorf("WaitReady = %v after %d probes; want nil after 3", err, calls)
	}

	never := func(context.Context) error { return errors.New("refused") }
	err := WaitReady(t.Context(), "x", 30*time.Millisecond, nil, never)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("WaitReady on a dead server = %v; want a timeout naming the last error", err)
	}

	exited := make(chan struct{})
	close(exited)
	err = WaitReady(t.Context(), "x", time.Minute, exited, never)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitReady on an exited process = %v; want an error saying so", err)
	}
}
