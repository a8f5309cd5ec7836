// Package e2e holds end-to-end tests that run the throttled binary as a real
// process, as an operator would: restarts on a data folder, kill -9 crashes
// under load with each fsync policy, floods of unique keys against a
// memory bound, and the adversarial suite (slowloris, clients that never
// read, thousands of idle connections, random bytes, huge bulk headers,
// wrong passwords), during which a well-behaved client must keep its
// latency, and the active-active mesh (--replication crdt) across three
// processes joined by proxies that can cut their links: partitions, kill -9
// and restarts, clock skew, each checked against one exact limiter charged
// with every admission. It has no code besides its tests.
package e2e
