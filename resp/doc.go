// Package resp is the wire side of throttled: the listener, one goroutine per
// connection, the request reader and the reply writer.
//
// Requests are RESP2 multibulk or inline commands, many per read; each is
// handed to a Handler in order and the replies are written back in one flush
// per batch (before the connection would block on a read). Every connection
// starts in RESP2; the handler switches it to RESP3 (HELLO 3), and the Writer
// then uses RESP3's null, map and verbatim types where Redis 7 does.
//
// The reply encoding uses tidwall/redcon's allocation-free Append functions.
// The request reader is our own rather than redcon's because Redis clients
// depend on Redis' request limits and error texts (proto-max-bulk-len, the
// 64 KiB inline limit, the tighter limits before AUTH, `*-1` ignored), which
// redcon's reader does not have, and because it parses without allocating.
package resp
