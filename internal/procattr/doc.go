// Package procattr holds the process attributes for every child process the
// benchmark tools start (servers and redis-benchmark).
package procattr
