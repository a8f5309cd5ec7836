package retry

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// StoreTelemetry is AATB's telemetry server in throttled: each report is a
// TELEMETRY.REPORT of Group and Client (docs/commands.md), which charges no
// quota. A group's clients must report to the same throttled node: each
// node aggregates its own reporters.
type StoreTelemetry struct {
	// Redis is the connection (a *redis.Client, *redis.Ring...).
	Redis         Doer
	Group, Client string
	// Omega is the group's window (the AATB's Omega; 0: the server's 30 s).
	Omega time.Duration
	// Policy, when set, ties the group to that policy's rate.
	Policy string
	// Timeout bounds each report (1 s when 0): AATB goes on alone when the
	// server does not answer.
	Timeout time.Duration
}

// Doer sends a command: go-redis' clients are Doers.
type Doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// Report sends one TELEMETRY.REPORT and reads the group's aggregate.
func (s *StoreTelemetry) Report(_ time.Time, sent int64, got429 bool) (Aggregate, error) {
	return s.send(sent, got429, -1)
}

// Reserve sends one TELEMETRY.REPORT with RESERVE: the group's aggregate
// and how long until the reserved slot. Policy must be set (or the group
// tied to a rate by another client): the group's rate spaces the slots.
func (s *StoreTelemetry) Reserve(_ time.Time, sent int64, got429 bool, after time.Duration) (Aggregate, error) {
	return s.send(sent, got429, max(after, 0))
}

// send reports, and reserves when after >= 0.
func (s *StoreTelemetry) send(sent int64, got429 bool, after time.Duration) (Aggregate, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	n429 := 0
	if got429 {
		n429 = 1
	}
	args := []any{"TELEMETRY.REPORT", s.Group, s.Client, sent, n429}
	if s.Omega > 0 {
		args = append(args, "OMEGA", s.Omega.Milliseconds())
	}
	if s.Policy != "" {
		args = append(args, "POLICY", s.Policy)
	}
	want := 5
	if after >= 0 {
		// Round up: a slot a little late is safe, one early is not.
		args = append(args, "RESERVE", (after+time.Millisecond-1)/time.Millisecond)
		want = 6
	}
	v, err := s.Redis.Do(ctx, args...).Int64Slice()
	if err != nil {
		return Aggregate{}, err
	}
	if len(v) != want {
		return Aggregate{}, fmt.Errorf("retry: TELEMETRY.REPORT answered %d integers, want %d", len(v), want)
	}
	agg := Aggregate{Active: v[0], Total: v[1], Clients429: v[2]}
	if v[3] > 0 && v[4] > 0 {
		agg.Rate = float64(v[3]) / (time.Duration(v[4]) * time.Millisecond).Minutes()
	}
	if want == 6 {
		agg.Slot = time.Duration(v[5]) * time.Millisecond
	}
	return agg, nil
}
