// Package resp is the wire side of throttled: the listener, the event loops
// that serve the connections, the request reader and the reply writer.
//
// On Linux a few event loops serve every connection, as redis-server's one
// does: each round reads the sockets epoll reports, runs their complete
// requests in order and then writes each connection's replies with one
// write (loop_linux.go says why, and how a handler call that waits is kept
// from stopping a loop). Elsewhere each connection has a goroutine of its
// own, which writes a batch's replies before it would block on a read.
//
// Requests are RESP2 multibulk or inline commands, many per read; each is
// handed to a Handler in order. Every connection
// starts in RESP2; the handler switches it to RESP3 (HELLO 3), and the Writer
// then uses RESP3's null, map and verbatim types where Redis 7 does.
//
// The reply encoding uses tidwall/redcon's allocation-free Append functions.
// The request reader is our own rather than redcon's because Redis clients
// depend on Redis' request limits and error texts (proto-max-bulk-len, the
// 64 KiB inline limit, the tighter limits before AUTH, `*-1` ignored), which
// redcon's reader does not have, and because it parses without allocating.
package resp
