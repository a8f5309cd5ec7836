// Package e2e holds end-to-end tests that run the throttled binary as a real
// process, as an operator would: restarts on a data folder, kill -9 crashes
// under load with each fsync policy, floods of unique keys against a
// memory bound, and the adversarial suite (slowloris, clients that never
// read, thousands of idle connections, random bytes, huge bulk headers,
// wrong passwords), during which a well-behaved client must keep its
// latency. It has no code besides its tests.
package e2e
