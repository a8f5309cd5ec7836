// Package client limits requests of a gateway or a service with throttled,
// over a go-redis connection pool, in one of three modes:
//
//   - PerRequest: every decision is one command to the store (CL.THROTTLE,
//     a native X.THROTTLE, or THROTTLE.ALL for several tiers; THROTTLE.POLICY
//     through Policies). The store's accounting is exact: what the limiter
//     admits is what the store counted. Each decision costs a round trip.
//
//   - TwoLayer: the coordinated-microservices design. Each limiter keeps a
//     local counter per key and fixed window, decides from its local view
//     (the store's total at the last sync plus what it admitted since), and
//     every sync interval sends what it admitted with INCRBY, which answers
//     the new global total. No decision waits for the store; the price is
//     over-admission: in one window, the store's total exceeds the limit by
//     at most what the instances admit in one sync interval together
//     (instances x what each admits in one interval).
//
//   - Lease: per key, a batch of units leased with QUOTA.LEASE (charged in
//     the store at the grant), spent locally, and given back unspent with
//     QUOTA.RETURN; the next batch is leased in the background before the
//     current one runs out, so only a key's first request waits for the
//     store. Never over the limit: the store counted every unit before it
//     was spent. Config.Share sizes the batches as a static percentage of
//     what remains or from the holder's recent use; Config.Lazy makes the
//     leases lazy (charged what they used at their return: no early
//     refusals, over the limit by at most instances x BatchSize).
//
// The API reads like golang.org/x/time/rate, with a key and a context:
// Allow, Decide (AllowN with the full Result), Reserve and Wait.
//
// When the store cannot answer (it is down, unreachable, or answers an
// error), the limiter's FailMode decides: FailClosed refuses, FailOpen
// admits through a local fallback limiter, bounded in both what it admits
// per key (its own tiers, evaluated by the engines package) and in how many
// keys it holds. Result.Fallback tells such a decision apart, and the error
// is returned beside it so the caller can log it.
//
// Package httplimit puts a net/http middleware on top.
package client
