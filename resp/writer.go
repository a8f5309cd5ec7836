package resp

import (
	"math"
	"strconv"

	"github.com/tidwall/redcon"
)

// Writer builds replies for one connection in a buffer that the server
// flushes. It knows whether the connection speaks RESP2 or RESP3 and picks
// the encoding Redis 7 uses for each. Not safe for concurrent use.
type Writer struct {
	b     []byte
	proto int
	// max, when above 0, bounds the buffer (the hard output limit): a
	// payload that would take it past max is dropped and over is set, and
	// the server closes the connection instead of sending what was built.
	// So one request asking for gigabytes (MGET of many big values) stops
	// costing memory at the limit, as Redis stops adding to the replies
	// of a client it will close.
	max  int
	over bool
}

// room reports whether n more payload bytes fit under max, and records
// when they do not.
func (w *Writer) room(n int) bool {
	if w.max > 0 && len(w.b)+n > w.max {
		w.over = true
		return false
	}
	return true
}

// Proto returns the protocol version in use (2 or 3).
func (w *Writer) Proto() int { return w.proto }

// Len returns the number of buffered bytes.
func (w *Writer) Len() int { return len(w.b) }

// Bytes returns the buffered reply bytes; they alias the writer's buffer.
func (w *Writer) Bytes() []byte { return w.b }

// reset empties the writer once its replies are sent. A buffer grown by one
// huge reply is dropped rather than kept by an idle connection.
func (w *Writer) reset() {
	if cap(w.b) > 4*maxPending {
		w.b = nil
	} else {
		w.b = w.b[:0]
	}
}

// Truncate drops buffered bytes beyond n, to undo a partly written reply.
func (w *Writer) Truncate(n int) { w.b = w.b[:n] }

// Reset empties the writer and sets its protocol (2 or 3), for a writer
// reused to build replies apart from a connection's.
func (w *Writer) Reset(proto int) { w.b, w.proto = w.b[:0], proto }

// Int writes an integer reply.
func (w *Writer) Int(n int64) { w.b = redcon.AppendInt(w.b, n) }

// Bulk writes a bulk string reply.
func (w *Writer) Bulk(b []byte) {
	if w.room(len(b)) {
		w.b = redcon.AppendBulk(w.b, b)
	}
}

// BulkString writes a bulk string reply.
func (w *Writer) BulkString(s string) {
	if w.room(len(s)) {
		w.b = redcon.AppendBulkString(w.b, s)
	}
}

// BulkInt writes n as a bulk string in decimal, as GET does for integers.
func (w *Writer) BulkInt(n int64) {
	var buf [20]byte
	w.b = redcon.AppendBulk(w.b, strconv.AppendInt(buf[:0], n, 10))
}

// Status writes a simple string reply (+OK). s must not contain CR or LF.
func (w *Writer) Status(s string) { w.b = redcon.AppendString(w.b, s) }

// OK writes +OK.
func (w *Writer) OK() { w.b = redcon.AppendOK(w.b) }

// Error writes an error reply. msg is the whole text after the '-', with its
// code ("ERR syntax error", "WRONGTYPE ..."); CR and LF become spaces.
func (w *Writer) Error(msg string) { w.b = redcon.AppendError(w.b, msg) }

// Null writes a missing value: $-1 in RESP2, _ in RESP3.
func (w *Writer) Null() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
		return
	}
	w.b = redcon.AppendNull(w.b)
}

// NullArray writes a missing array (EXEC aborted by WATCH): *-1 in RESP2, _ in
// RESP3.
func (w *Writer) NullArray() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
		return
	}
	w.b = append(w.b, "*-1\r\n"...)
}

// Array starts an array of n elements.
func (w *Writer) Array(n int) { w.b = redcon.AppendArray(w.b, n) }

// Map starts a map of n key/value pairs: %n in RESP3, a flat array of 2n
// elements in RESP2.
func (w *Writer) Map(n int) {
	if w.proto == 3 {
		w.b = append(w.b, '%')
		w.b = strconv.AppendInt(w.b, int64(n), 10)
		w.b = append(w.b, '\r', '\n')
		return
	}
	w.Array(2 * n)
}

// Set starts a set of n elements: ~n in RESP3, an array in RESP2.
func (w *Writer) Set(n int) {
	if w.proto == 3 {
		w.b = append(w.b, '~')
		w.b = strconv.AppendInt(w.b, int64(n), 10)
		w.b = append(w.b, '\r', '\n')
		return
	}
	w.Array(n)
}

// Verbatim writes text as a RESP3 verbatim string of format "txt" (as Redis
// does for INFO and CLIENT LIST), or as a bulk string in RESP2.
func (w *Writer) Verbatim(text []byte) { w.VerbatimString("txt", string(text)) }

// Bool writes a RESP3 boolean (#t / #f), or in RESP2 the integer 1 or 0, as
// Redis converts it.
func (w *Writer) Bool(v bool) {
	switch {
	case w.proto != 3 && v:
		w.Int(1)
	case w.proto != 3:
		w.Int(0)
	case v:
		w.b = append(w.b, "#t\r\n"...)
	default:
		w.b = append(w.b, "#f\r\n"...)
	}
}

// Double writes a RESP3 double (",1.5"), or in RESP2 the same text as a bulk
// string; the text is Redis' "%.17g" with "inf", "-inf" and "nan".
func (w *Writer) Double(f float64) {
	var num [32]byte
	var txt []byte
	switch {
	case math.IsInf(f, 1):
		txt = append(num[:0], "inf"...)
	case math.IsInf(f, -1):
		txt = append(num[:0], "-inf"...)
	case math.IsNaN(f):
		txt = append(num[:0], "nan"...)
	default:
		txt = strconv.AppendFloat(num[:0], f, 'g', 17, 64)
	}
	if w.proto != 3 {
		w.Bulk(txt)
		return
	}
	w.b = append(w.b, ',')
	w.b = append(w.b, txt...)
	w.b = append(w.b, '\r', '\n')
}

// BigNumber writes a RESP3 big number ("(123..."), or in RESP2 a bulk string
// of its digits.
func (w *Writer) BigNumber(s string) {
	if w.proto != 3 {
		w.BulkString(s)
		return
	}
	w.b = append(w.b, '(')
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

// VerbatimString writes text as a RESP3 verbatim string of a three-letter
// format ("txt", "mkd"), or in RESP2 a bulk string of the text.
func (w *Writer) VerbatimString(format, text string) {
	if w.proto != 3 {
		w.BulkString(text)
		return
	}
	if !w.room(len(text)) {
		return
	}
	w.b = append(w.b, '=')
	w.b = strconv.AppendInt(w.b, int64(len(format)+1+len(text)), 10)
	w.b = append(w.b, '\r', '\n')
	w.b = append(w.b, format...)
	w.b = append(w.b, ':')
	w.b = append(w.b, text...)
	w.b = append(w.b, '\r', '\n')
}
