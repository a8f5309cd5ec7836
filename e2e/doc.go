// Package e2e holds end-to-end tests that run the throttled binary as a real
// process, as an operator would: restarts on a data folder, kill -9 crashes
// under load with each fsync policy, and floods of unique keys against a
// memory bound. It has no code besides its tests.
package e2e
