// Package engines implements the native rate-limit algorithms of throttled as
// pure functions: no I/O, no clock, no locks, no floats. The caller supplies
// now (Unix nanoseconds) and the key's encoded state; every time and duration
// is an int64 in ns, and all arithmetic is exact integer arithmetic, so two
// replicas on different architectures compute the same bytes.
//
//	FWC  fixed window counter     NewFWC(limit, window)
//	SWL  sliding window log       NewSWL(limit, window)
//	SWC  sliding window counter   NewSWC(limit, window, n)
//	TB   token bucket             NewTB(capacity, refillCount, refillPeriod)
//	LB   leaky bucket as a queue  NewLB(capacity, leakCount, leakPeriod)
//
// # Use
//
// A constructor validates the parameters (so bad input is refused before a key
// is touched) and returns a Limiter. Limiter.Check decides a request without
// changing anything; when it is allowed and qty > 0, Limiter.Commit records it
// and returns the new state and fullAt, the instant from which the state is
// equivalent to no state at all: the key can expire then. Apply runs the two.
// Commit re-checks the request and refuses one Check would limit
// (ErrLimited), so the bounds below hold whatever the caller does.
//
// # Replies
//
// Result describes the key after the request (after recording it if allowed):
//
//   - Limit: the most units that pass at once on a fresh key: the limit
//     (FWC, SWL, SWC), the capacity (TB), capacity+1 (LB, see below).
//   - Remaining: how many more 1-unit requests would pass right now, 0..Limit.
//   - RetryAfter: -1 when allowed, and -1 when qty > Limit (it can never
//     fit); otherwise the exact wait until the same request would pass (> 0).
//   - ResetAfter: the time until the state is full again, 0 if it is; after a
//     Commit, fullAt = t + ResetAfter, t being the time the decision used.
//   - Delay: LB only, the time to hold an admitted request before forwarding
//     it; 0 for everything else, peeks and limited requests included.
//
// Quantity 0 peeks: it is allowed unless the state is over its limit (after
// the key's limit was lowered), and never changes anything. A negative
// quantity is ErrNegative.
//
// # Time going backwards
//
// A now earlier than the newest time the state has recorded (the now of its
// last Commit) is treated as that newest time, and the Result's durations are
// measured from it. The state never moves backwards and never regains
// capacity from a stale now: this is the bug of golang.org/x/time/rate issue
// 71360 (which rewinds its "last" time and mints tokens, up to 5000x
// over-admission under lock contention). Peeks and limited requests record
// nothing, so they do not advance the state's notion of now either.
//
// # Algorithms
//
// FWC counts units per window [i*window, (i+1)*window), aligned to the Unix
// epoch (i = floor(now/window), also for negative now). The count resets at the
// window's end, which is when a limited request may retry and when the key is
// full.
//
// SWL admits at most limit units in every window (t-window, t], exactly. It
// keeps one entry per distinct admission time (equal times share an entry
// with a count), in a ring buffer with running totals: Check finds the oldest
// live entry by a galloping search from the old end, O(log k) for the k
// entries expired since the last Commit (O(1) in steady state, however long
// the log), and reads the live total as a difference of two totals, so a flood
// of limited requests never scans the log; Commit drops expired entries from
// the old end and appends at the new end in place. The limit is at most
// MaxSWLLimit (ErrLimitTooLarge above), which bounds the log.
//
// SWC keeps n counters (SUBWINDOWS n, MinSubwindows..MaxSubwindows, default
// DefaultSubwindows), each for a sub-window of window/(n-1) ns, and estimates
// the units in (now-window, now] as the current counter + the n-2 before it +
// floor(c*(S-elapsed)/S) of the oldest c, S being the sub-window length and
// elapsed the time into the current one. n = 2 is exactly Cloudflare's
// two-counter estimate. When window is not a multiple of n-1, sub-window k
// starts at ceil(k*window/(n-1)): boundaries are exact integers, each window
// of n-1 sub-windows is exactly window ns and aligned to the epoch, and the
// weight uses the true length of the sub-window. RetryAfter is the first
// instant the estimate fits the request, ResetAfter the first instant the
// estimate is 0 for good; both are exact.
//
// TB and LB are one "debt bucket" (reference crdt-design.md 1.1), the GCRA
// recurrence in units chosen to make every rate an integer: the period P is
// the unit of a token (TB) or request (LB), the bucket drains count units per
// ns, a request of q costs q*P, and it is allowed iff debt + cost <= size.
// Non-integer intervals (P/count) are thus exact.
//
//   - TB, capacity C: size C*P. It starts full (no state, no debt) and refills
//     continuously; Remaining is the whole tokens left, C - ceil(debt/P).
//   - LB, capacity c: size (c+1)*P. The debt is the time, in units, until the
//     queue has drained, so an admitted request's leak slot is debt/count ns
//     away: that is its Delay (rounded up to whole ns). capacity is how many
//     requests may wait (Delay > 0); the request that finds the queue empty
//     leaves at once, so c+1 pass at once from empty and Limit is c+1, as
//     CL.THROTTLE shows max_burst+1. Remaining is how many more requests the
//     queue takes now. Admission is that of a TB of capacity c+1.
//
// # State encoding
//
// Every state starts with a version byte (1) and a kind byte (the Kind), so
// KindOf tells which engine wrote a key. Integers are little-endian, the byte
// order of amd64 and arm64. Check and Commit refuse a state of another Kind
// (ErrWrongKind) and a malformed one (ErrCorruptState: unknown version or
// kind, wrong length, impossible header values), never panicking; they do not
// validate every entry of a sliding window log, so a well-formed but garbled
// log yields wrong answers rather than an error. nil or empty means no state.
//
//	FWC  18 B           newest int64, count int64
//	SWL  14 + 12*cap B  head uint32, n uint32, base uint32; cap x (t int64, cum uint32)
//	SWC  10 + 8*n B     newest int64, n counters int64 (newest's sub-window first)
//	TB   26 B           cut int64, debt int64, unit int64
//	LB   26 B           cut int64, debt int64, unit int64
//
// Memory per key is therefore fixed for FWC (18 B), TB and LB (26 B) and SWC
// (26 B with n = 2, at most 490 B with n = 60). SWL holds at most one entry
// per admitted unit in the window: cap starts at min(limit, 8), doubles as
// needed and is at most the largest limit the key was used with, so a key
// takes at most 14 + 12*MaxSWLLimit bytes (about 1.2 MB; 120 KB at limit
// 10,000). Commit writes in place when state has room (always, except when an
// SWL log grows, when SWC's n changes, and for a new key); a Commit that fails
// writes nothing.
//
// # Changing parameters on a live key
//
// Parameters travel with every command and are never stored, as in
// redis-cell, so a key may be used with other values. The states are kept
// readable under them: SWL's log is exact under any limit or window; TB and
// LB store the unit their debt is in and convert it to a new period rounding
// up, so changing their parameters never mints capacity. FWC charges its count
// to the window, under the new length, that holds its newest time, and SWC
// reads its counters as the newest sub-windows under the new window and n
// (dropping the oldest if n shrank): both can under-count for up to one window
// after a change. A lowered limit can leave a state over it: such a key is
// limited, peeks included, until it drains.
//
// # Decided from fields
//
// CheckDebt (TB, LB) and CheckCounts (FWC, SWC) are Check on a state given as
// its fields, DebtAt is the bucket's drain step, Index numbers (sub-)windows
// and ParamsOf returns a Limiter's parameters. They exist for the
// active-active mode (replication/crdt/mstate), which combines the parts of
// a key written by several nodes into one such state and decides on it with
// this package's arithmetic.
//
// # Leases
//
// Credit gives back unused units of an earlier Commit that GrantOf located
// (a quota lease's return), exactly on FWC, SWL and SWC, never more than
// exactly on TB and LB, whose debt may have drained meanwhile; Force records
// units past the limit (a lazy lease's report; not SWL, whose log is bounded
// by its limit). docs/leases.md has the argument for the buckets.
//
// # Overflow
//
// Constructors refuse parameters whose products do not fit in int64
// (ErrOverflow): C*P for TB, (c+1)*P for LB, and for SWC a window above
// MaxInt64/3 or a limit above MaxInt64/2. Decisions whose instants would not
// fit (a window end past the year 2262) are ErrOverflow, never wrapped.
package engines
