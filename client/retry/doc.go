// Package retry holds the client-side retry strategies of the study
// "Rethinking HTTP API Rate Limiting: A Client-Side Approach" (its Tables
// III-V), for clients that share one quota and pay for each refused
// attempt, and one of ours that uses what throttled tells a refused client:
//
//   - UB, unlimited backoff: a random wait whose upper bound doubles with
//     each failure of a request, up to a cap drawn from [30, 34] s.
//   - WB: UB plus at most W attempts in any 60 s.
//   - ATB, an adaptive token bucket per client (Table III): Acquire,
//     Increase_rate on a success, Decrease_rate on a 429, with sigma,
//     delta, alpha and beta.
//   - AATB, ATB assisted by a telemetry server (Table IV): routine_update
//     every omega and congestion_notification on a 429, answered with the
//     group's active clients, requests, clients that saw a 429 and the
//     limit's rate. throttled is that server (TELEMETRY.REPORT; see
//     StoreTelemetry).
//   - Hinted, ours: when a response carries throttled's retry_after
//     (Retry-After, or the IETF RateLimit fields), it waits exactly that
//     long, spread over the group's clients, and after a success it paces
//     by the remaining quota; with throttled as its telemetry, the group's
//     clients take turns by its slots (TELEMETRY.REPORT ... RESERVE, see
//     Scheduler) instead of random places; when a response carries no
//     hint, it falls back to AATB or ATB.
//
// A Strategy is a state machine over instants passed in: Wait says how long
// the next attempt must wait, Sent records one going out, Done its outcome.
// It reads no clock and sleeps never, so the bench emulator drives it in
// virtual time. Client adds a clock (Clock, real by default) and a FIFO: one
// attempt in flight per client, the others waiting their turn in order, as
// the study's clients buffer their requests; Acquire/Report is its plain
// API and Transport wraps an http.RoundTripper with it.
//
// Rates are per minute and times in seconds where the study's tables give
// them so, so parameters read as there; Table V's defaults are DefaultATB,
// DefaultAATB, DefaultWindow and the UB cap.
package retry
