// Package compat holds black-box tests that talk to a server over a real
// socket and compare every reply, byte for byte, with recorded expectations.
//
// The tests are scripts in testdata/*.txt, run by script_test.go. A script
// marked "# target: both" runs against throttled and against a real
// redis-server (when one is installed), and both must give the same output:
// that is how we know our replies are Redis' own. Scripts marked
// "# target: throttled" cover what Redis 7.0 lacks (CL.THROTTLE, DEBUG CLOCK,
// CLIENT SETINFO), values that are our own (DEBUG DIGEST) and the
// differences we keep on purpose, each with a comment
// saying why. "# target: redis" records Redis behaviour that throttled cannot
// show yet (a key of another type), ready to be switched to "both".
//
// The script format is described at the top of script_test.go. After a
// change of behaviour, `go test ./compat -rewrite` rewrites the expected
// outputs from the reference target (redis-server for "both" files); commit
// the diff only if you understand it.
package compat
