// Package resp is the wire side of throttled: the listener, the event loops
// that serve the connections, the request reader and the reply writer.
//
// On Linux a few event loops serve every plain TCP connection, as
// redis-server's one does: each round reads the sockets epoll reports, runs
// their complete requests in order and then writes each connection's
// replies with one write (loop_linux.go says why, and how a handler call
// that waits is kept from stopping a loop). TLS connections (ServeTLS), and
// every connection elsewhere, have a goroutine of their own, which writes a
// batch's replies before it would block on a read: crypto/tls wants a
// blocking net.Conn, and a TLS request pays for its encryption far more
// than for the goroutine (Server says more).
//
// Redis' client limits (ClientLimits, limits.go) apply to both: maxclients
// and protected mode at accept, the query buffer limit in the reader, the
// hard output limit before each write (the Writer stops building replies
// past it), and the timeout and the soft output limit in a cron that looks
// at every connection ten times a second, as Redis' clientsCron does. Each
// connection publishes what it holds (Conn.Mem: qbuf, omem, tot-mem) after
// each round, and an event loop gives back the buffers of a connection idle
// for 2 s.
//
// Deferred replies: a command whose reply waits (a Raft commit, the
// leader's answer to a forwarded command, an fsync) must not stop its loop,
// and a Raft leader batches many commands per log entry only if many are in
// flight at once, several of one pipelining connection among them. So a
// handler may leave the reply for later (Conn.Defer) and deliver it from any
// goroutine (Deferred.Resolve). The connection is served on meanwhile: the
// replies of its later commands are held behind the deferred one, and each
// resolution releases the ready prefix, so the client sees every reply in
// request order. The held replies are bounded (1024 deferred, 64 KiB behind
// them); past that, or after DeferBarrier, QUIT or a protocol error, the
// connection is not read until replies resolve. A goroutine per connection
// simply waits for all its deferred replies before it reads on.
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
