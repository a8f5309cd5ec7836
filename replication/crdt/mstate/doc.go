// Package mstate holds the mergeable (CRDT) states of throttled's rate
// limiters and of plain Redis strings, for the active-active mode
// (--replication crdt, issue 14; the
// design study is shared/reference/crdt-design.md). Like gcra and engines it
// is pure: functions over encoded states, no I/O, no clock, no locks, no
// floats. The transport, the node and the wiring into the commands live
// elsewhere.
//
// # Model
//
// Every node decides on its own copy of a key (Limiter.Decide) and writes
// only its own part of it. Nodes ship states to each other and join them
// with Merge, which is commutative, associative and idempotent on the
// encoded bytes: however states are lost, duplicated, reordered or grouped
// on the way, nodes that have merged the same ones hold the same bytes. Once
// every admission has reached every node, each node decides exactly as one
// single-node limiter charged with all of them: nothing admitted anywhere is
// lost, and a key one node writes alone answers exactly as engines.Apply and
// gcra.Decide do (the timeline tables of both packages check it).
//
// A writer is an Origin: a node id (hashed) and its incarnation, which
// changes on every start. Time is integer ns. A decision's time is now, or
// the writer's newest stamp on the key when now is earlier, so one writer's
// stamps never go back; another origin's stamp never moves it. The node
// should also make its stamps monotone across keys, since its watermark
// (below) promises that none is earlier than one it has announced.
//
// Replies are engines.Result, decided by the engines' (and gcra's) own
// arithmetic on the single-node state the parts combine into: see
// engines.CheckDebt and engines.CheckCounts. Errors are theirs too
// (engines.ErrCorruptState for a malformed state, engines.ErrWrongKind for
// another algorithm's, engines.ErrOverflow, gcra's for CL.THROTTLE).
//
// # GCRA, TB and LB: the debt log (study 1.1)
//
// The three are one debt bucket: a debt D >= 0 drains at a rate, and a
// request of cost c passes iff D + c fits the bucket. D depends only on the
// set of admitted events, not on the order they were learnt in, so the
// state is that set: events keyed (t, origin) with a cost that only grows
// (an origin's admissions at one instant form one entry, or over one
// aligned quantum once its writer coarsened them), and a cut h with a
// base B, the debt at h of every event at or before h. The join is the base
// of the later cut and the union of the events after it, each at its largest
// cost.
//
// Each event carries its drain (unit, rate): the period and count of the TB
// or LB call that admitted it; GCRA's are ns costs (T*quantity) draining 1
// ns per ns, as redis-cell's TAT. Replaying the events in key order through
// engines.DebtAt (convert to the event's unit, drain at its rate, add its
// cost) is exactly the engine's sequence of Commits, so one writer matches
// the engine even when parameters change; and folding needs no parameters,
// so nodes with the same knowledge fold to the same bytes. (A writer that
// changes parameters within one ns starts a new segment of its entry, so the
// replay follows its order of admission.) An event stamped
// after the decision time counts as if stamped then: a node whose clock runs
// ahead mints nothing on the others (and one that lags under-charges by at
// most rate*skew).
//
// Fold(state, T) folds the events stamped before T into the base and moves
// the cut to the newest of them. T must be a completeness bound: the node
// knows every event stamped before T that any node will ever make (the least
// watermark of the mesh, study 0). Folding past it would drop the events
// that arrive later; the algebra tests plant that mistake and catch it. A
// quiet key is (h, B): redis-cell's TAT is h+B. Decide folds the log it
// writes at the bound it is given, so a key is folded where it is written,
// and a folded state is above the unfolded one in the join: the nodes
// that merge it need not fold it again to end with the same bytes.
//
// Never merge TATs or token counts by max, last writer wins or sum: the
// first two lose concurrent admissions, the last drains N times too fast.
//
// # FWC and SWC: per-origin slots (study 1.3, 1.4)
//
// A slot is one origin's own counts, as its single-node engine keeps them
// (the newest stamp, the counts of its (sub-)window and those before), plus
// one older count for nodes whose clocks lag a (sub-)window behind: FWC
// keeps (newest, count, previous count), SWC the engine's n counters and one
// more. An origin's slot only grows in (newest, counts...) order, so the join
// takes each origin's largest slot. A decision sums, per (sub-)window, every
// slot's count as seen from its own; SWC counts a slot's (sub-)windows after
// its own as its own (a clock running ahead mints nothing), FWC leaves them
// to their window, which resets the count anyway (study 1.3).
//
// # SWL: per-origin entries (study 1.5)
//
// The log of every origin's admissions: (t, origin) -> units, an entry that
// only grows, joined by max. A decision counts the units stamped after
// now-window, those stamped after now included.
//
// # Strings (study 1.6)
//
// GET, SET, INCRBY/DECRBY, DEL, EXPIRE and PERSIST with the semantics of
// Redis Active-Active: StrGet, StrSet, StrIncr, StrDel and StrExpire, each
// a pure function of the encoded state, self and now (Unix ns; TTLs are
// Unix ms, compared as store.Expired does). A string is a register, the
// counters made on it, and its expiry:
//
//   - The register (stamp, origin, deleted, value) is written by SET (a
//     value) and DEL (a tombstone), stamped max(now, newest stamp in the
//     state + 1), the newest of the register's stamp and its expiry epoch:
//     a write that saw another is ordered after it on every node, whatever
//     their clocks. The join keeps the greater register by (stamp,
//     origin); a tombstone never lets an older write come back. A key
//     never written has the register (MinInt64, the zero origin,
//     deleted), below every other.
//   - Counters: per origin, its increments P and decrements N (uint64)
//     made on the current register. On one register the join takes each
//     origin's larger P and N, and the value is the register's (0 for a
//     tombstone) plus the sum of P-N, so concurrent INCRs add up, a fresh
//     key's included: they all count on the register of a key never
//     written, and after a DEL on its tombstone. Otherwise only the
//     greater register's counters survive: a SET or DEL replaces what it
//     observed, and increments made concurrently on the register it
//     replaces (on a node that had not seen it) are lost to it. A SET
//     from a node that had not seen the register concurrent increments
//     count on may be stamped before it, and then loses to it, increments
//     and all, as any earlier write does.
//   - The expiry (epoch, ms) of the register: ms 0 for no TTL set, Persist
//     (MaxInt64) after PERSIST, in the order 0 < any time < Persist. On one
//     register the join takes the larger (epoch, ms). An EXPIRE that
//     extends (ms at or after the current) keeps the epoch, so the longest
//     of concurrent extensions wins and PERSIST wins over them; one that
//     shortens starts an epoch stamped like a write, so a shortening wins
//     over every expiry its node had seen. SET without KEEPTTL starts
//     with none; SET KEEPTTL carries the current one; INCR keeps it.
//
// Two details go beyond that model. A key whose TTL has passed reads as
// missing, and a write on it counts on its expiry tombstone: the register
// (stamped the first ns after the expiry millisecond, and after the expired
// register; the zero origin; deleted). Every node derives the same one from
// the expired register and its expiry, so INCRs made after an expiry on
// several nodes add up (the rate-limit pattern INCR, EXPIRE), and a stale
// copy of the expired value merged later never comes back; counting on the
// fresh register instead would lose them all to that copy. A DEL of the
// live key is stamped before the expiry, so a node that had not seen it
// when it counted on the expired key keeps its INCRs, as they would count
// from 0 after the DEL on a single node. (A node whose clock
// lags, and increments the register before it sees it expire, loses that
// increment to the ones after.) The zero origin is therefore reserved:
// string writes by it are ErrReservedOrigin. And INCRBY 0 on a missing key
// creates it with value 0, as Redis does, through an entry (0, 0), which
// only tombstones may hold.
//
// Errors: ErrNotInteger for an INCR on a value that is not the canonical
// decimal form of an int64; engines.ErrOverflow for a result outside
// int64, a counter past 2^64-1 (a key churning 2^64 in one direction on
// one register), or a value that increments merged from several nodes
// carried out of int64 (it reads so until a SET, a DEL or a decrement
// brings it back); ErrBadExpiry for SET with both an expiry and KEEPTTL,
// or a negative one. An expiry already passed deletes the key, as in
// Redis: a tombstone.
//
// Expiry is judged at now, so the node's now must not go back on a key: a
// key seen expired would read live again before its expiry time. Nor may
// the store drop a string state at its TTL: an expired state must be kept
// until it can go as a tombstone does. StrTombstone tells which states read
// as missing for good, and from which stamp; dropping them safely (every
// node holds the tombstone or a later write, and no node writes on a copy
// that dropped it while another keeps it) is the node's decision, for
// instance under a mesh-wide bound below which every node treats them as no
// state, before each merge and each write.
//
// # Resets
//
// Reset forgives a key's history on every node (THROTTLE.RESET): a mark,
// a max register, that moves the state's cut or floor to the reset's
// stamp, so that every join drops what was admitted up to it. See
// reset.go.
//
// # Retiring window state
//
// A window state has a floor, a max register: the join drops the slots
// (newest stamp) and entries at or below it. An admission at t raises it to
// t - skew - span, span being how long a slot or entry can still count for a
// decision: a window (FWC, SWL) or two (SWC). No node whose clock is within
// skew of this one counts what it drops, so dead origins (old incarnations,
// removed peers) do not pile up in a key that stays busy. The skew is the
// mesh's --crdt-max-skew, given to New.
//
// # Encodings
//
// Every state starts with a version byte (1) and a kind byte (Kind).
// Integers are little-endian; origins are (node uint64, inc uint64). Tables
// list the distinct origins (or drains) of a state once, ascending, with a
// uint16 count, and entries refer to them by a uint16 index; lists of
// events, entries and slots start with a uint32 count, so a state cut short
// never reads as a shorter one. Everything is sorted and every table entry
// used, and the decoders refuse any other bytes, so a state has exactly one
// encoding: equal states are equal bytes. nil or empty is the empty state.
// A string state's counters list each origin once, ascending, inline; a
// tombstone holds no value, and none without counters holds a TTL; counters
// sit on an integer value or on a tombstone.
//
//	GCRA  cut, base int64; origins; events (t, cost int64, origin uint16)
//	TB/LB cut, base, unit int64; origins; drains (unit, rate int64);
//	      events (t, cost int64, origin, drain, segment uint16)
//	FWC   floor int64; slots (origin, newest int64, 2 uint8, count, previous int64)
//	SWC   floor int64; slots (origin, newest int64, w uint8, w counters int64)
//	SWL   floor int64; origins; entries (t, units int64, origin uint16)
//	Str   stamp int64, origin, deleted uint8; value (length uint32, bytes);
//	      epoch, expireMs int64; counters (origin, p uint64, n uint64)
//
// A rate-limit key reset on a mesh (Reset, reset.go) is version 2: its
// kind, the reset's stamp int64, then its version 1 encoding after the
// header; a bare mark (kind Marker, a reset of a key its node did not
// hold) ends after the stamp.
//
// # Memory per key
//
//	       quiet               active
//	GCRA   24 B (TAT = h+B)    + 16 B per origin in the log + 18 B per event
//	TB/LB  34 B                + 16 B per origin and per drain + 22 B per event
//	FWC    14 B + 41 B per origin whose slot still counts
//	SWC    14 B + (25 + 8(n+1)) B per origin whose slot still counts
//	SWL    16 B + 16 B per origin + 18 B per entry
//	Str    51 B + the value + 32 B per origin that counted on the register
//
// A debt log holds the events after the completeness bound of its last
// write: those admitted within about the max skew + sync interval + delay
// before it (the study measured a p99 of 1-34 events), kept until the next
// write folds them or the key expires. During a partition the bound stops
// and the log would keep every event since the split, and a key decided
// thousands of times a second holds thousands: so past capEvents (64)
// events of its writer, the writer coarsens them (the study's per-key cap,
// debt.go): each of its events older than 4 minQuantum goes into one coarse
// event at the end of an aligned quantum of at most a quarter of its age,
// with their summed cost. The log then stays within 64 events of its writer
// (about 1.2 KB for GCRA). Cost moved later never lowers a later debt and
// raises it by less than the quantum; a coarse event covers its origin's
// finer events in its quantum, and a join drops them (it counts them).
// Bounds.Unfolded keeps a coarse event off any node that may already have
// folded part of its quantum, which would charge that part twice. An SWL log holds at most
// the units admitted within window+skew: limit + X connected, P*limit in a
// partition into P sides, each under MaxSWLLimit.
//
// # Bounds (study 3)
//
// With X = max_i sum_{j!=i} a_j(lag), the most the other nodes admit unseen
// by node i within the replication lag (about sync interval + delay):
//
//   - GCRA, TB, LB: any window [a, b] admits at most env(b-a) + X, where env
//     is the single-node envelope (max_burst+1 + (b-a)/T for GCRA,
//     capacity+1 + (b-a)/interval for LB, C + k(b-a)/P for TB). A
//     coordinated burst on a full key gives exactly (N-1) x burst.
//     A partition into P sides admits at most P*env + sum X_s; after the heal
//     every node carries the whole debt and admits nothing until it is
//     repaid (about extra*T), so no window ending after that gains anything.
//   - FWC, SWC, SWL: at most limit + X per window, every window (nothing is
//     repaid: the debt leaves with the window); P*limit during a partition.
//   - Clock skew s adds ceil(rate*s/c) to the debt log (ceil(s/T) for GCRA)
//     and a_j(s) per window boundary to the window engines.
package mstate
