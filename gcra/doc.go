// Package gcra implements the generic cell rate algorithm with redis-cell semantics as a
// pure function: no I/O, no clock, no locks; the caller supplies now (Unix nanoseconds).
//
// One limit is described by max_burst B, count C and period P (whole seconds), exactly as
// the arguments of CL.THROTTLE. The only per-key state is the theoretical arrival time
// (TAT) in Unix nanoseconds. All arithmetic is exact int64 nanoseconds: no floats, so two
// replicas on different architectures always compute the same bytes (the Go spec lets
// the compiler fuse float multiply-adds, which could differ between amd64 and arm64).
//
// The formula (reference notes, section 3):
//
//	T        = floor(P*1e9 / C)       emission interval; 0 is rejected (ErrZeroRate)
//	L        = B + 1                  the "limit" reply element
//	tau      = T * L                  delay variation tolerance (bucket size)
//	inc      = T * quantity
//	base     = max(tat, now)          a TAT in the past (or a missing key, tat 0) is now
//	new_tat  = base + inc
//	allow_at = new_tat - tau
//	limited  = now - allow_at < 0     so new_tat == now + tau is still allowed
//	limited:  retry = inc <= tau ? allow_at - now : -1   ttl = base - now  (nothing stored)
//	allowed:  retry = -1                                 ttl = new_tat - now  (store new_tat)
//	next      = tau - ttl
//	remaining = next > -T ? next / T : 0   (Go truncation, so never negative, never > L)
//	reset     = ttl
//
// Decide computes the same quantities in an order that cannot overflow silently
// (limited is evaluated as new_tat-now > tau, which is the same inequality): every
// intermediate is checked, and any value that would not fit in int64 is reported as
// ErrOverflow instead of wrapping around as redis-cell does.
//
// Where this package deliberately differs from redis-cell (reference section 7):
//
//   - remaining uses exact nanosecond division. redis-cell divides whole microseconds in
//     f64, which for fast rates can exceed the limit, be 0 or be MaxInt64.
//   - T is exact integer division. redis-cell divides in f64, which can be 1 ns off for
//     periods of about 104 days or more.
//   - Negative arguments and overflow are errors (redis-cell accepts them and replies
//     with nonsense).
//
// Replies are in whole seconds; Seconds applies redis-cell 0.4/0.5's rounding (a
// ceiling at whole-millisecond resolution, sub-millisecond remainders ignored), and TTL
// gives the key lifetime in milliseconds that redis-cell sets with PEXPIRE.
//
// Time going backwards cannot mint capacity: the state is a single absolute TAT and
// base = max(tat, now), so an earlier now only makes the key look fuller than it is.
// This is unlike golang.org/x/time/rate, whose rewinding of "last" lets a stale now
// create tokens (golang/go issue 71360).
//
// Credit and Force serve quota leases (docs/leases.md): Credit moves the TAT back
// by a lease's unused intervals, but never past the debt its grant left, drained
// to now, so it never gives back what a later decision relied on; Force records
// units past the limit.
package gcra
