package resp

import (
	"bytes"
	"errors"
	"io"
	"math"
	"sync/atomic"
	"unsafe"
)

// Limits bound what one request may hold. Zero fields mean the Redis defaults.
type Limits struct {
	MaxBulkLen   int64 // proto-max-bulk-len, default 512 MiB (536870912)
	MaxInlineLen int   // default 64 KiB (65536): inline request and header lines
	// MaxQueryLen bounds the bytes one unfinished request may hold, Redis'
	// client-query-buffer-limit (default 1 GiB). Past it Read returns
	// ErrQueryTooBig and the connection is closed without a reply, as Redis
	// does.
	MaxQueryLen int
}

// ErrQueryTooBig is returned by Read when a request outgrows MaxQueryLen.
var ErrQueryTooBig = errors.New("resp: request exceeds the query buffer limit")

// ProtocolError is a malformed request. Redis answers
// "-ERR Protocol error: <Msg>" and then closes the connection (after
// executing the commands that came before it in the same read).
type ProtocolError struct{ Msg string }

// Error returns "Protocol error: " + Msg, the text Redis puts after "-ERR ".
func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

const (
	// rdDefaultMaxBulkLen is proto-max-bulk-len's default.
	rdDefaultMaxBulkLen = 512 << 20
	// rdDefaultMaxQueryLen is client-query-buffer-limit's default.
	rdDefaultMaxQueryLen = 1 << 30
	// rdDefaultMaxInlineLen is PROTO_INLINE_MAX_SIZE.
	rdDefaultMaxInlineLen = 64 << 10
	// rdMaxCount is INT_MAX, the ceiling Redis puts on a multibulk count.
	rdMaxCount = math.MaxInt32
	// rdUnauthMaxCount and rdUnauthMaxBulk are the limits Redis applies
	// before a client has authenticated (when a password is required).
	rdUnauthMaxCount = 10
	rdUnauthMaxBulk  = 16384
	// rdMinBuf is the first buffer size and the size the buffer returns to
	// after a big request. It is PROTO_IOBUF_LEN, Redis' read size: a
	// pipeline of small commands is read many commands per system call.
	rdMinBuf = 16 << 10
	// rdMaxKeep is the largest buffer kept once it has drained; a bigger one
	// (grown for a big request) is dropped so an idle connection does not
	// pin it.
	rdMaxKeep = 64 << 10
	// rdMaxKeepArgs bounds the argument slices kept across commands, for the
	// same reason.
	rdMaxKeepArgs = 4096
	// rdMaxEmptyReads is how many (0, nil) reads in a row count as a broken
	// reader, the bound bufio uses.
	rdMaxEmptyReads = 100
)

// rdErrNegativeRead reports an io.Reader that returned an impossible count.
var rdErrNegativeRead = errors.New("resp: reader returned invalid count from Read")

// Reader reads RESP2 multibulk and inline requests from r. Not safe for
// concurrent use.
//
// It mirrors Redis 7's processMultibulkBuffer and processInlineBuffer (see
// the comments on each rule below), but keeps its progress through a
// request that has not fully arrived, so a big request is scanned once, not
// once per read, and it makes no allocation per command once its buffers
// have grown to fit the traffic.
type Reader struct {
	src  io.Reader
	lim  Limits
	auth bool
	// live, when set, holds the server's client limits, whose MaxQueryLen
	// wins over lim's: CONFIG SET client-query-buffer-limit applies to the
	// connections already open.
	live *atomic.Pointer[ClientLimits]

	// buf[start:end] is read but not consumed. start is where the current
	// (possibly partial) request begins; every offset below is relative to
	// it, so the bytes can be moved (compacted or grown) without fixing
	// anything up.
	buf        []byte
	start, end int

	err  error // the protocol error, sticky
	pend error // the source's error that came with data, returned once the data is used

	// Progress through a multibulk request that is not complete yet.
	left int      // bulks still to read; 0 when not inside a multibulk
	pos  int      // where the next bulk header or payload starts
	bulk int64    // length of the bulk at pos, or -1 before its header is read
	offs []int    // start and end of each bulk read so far
	args [][]byte // returned by Read, reused

	// Progress of the search for the end of the line that starts at pos
	// (a header) or at 0 (an inline request): bytes [0, scan) of the line
	// hold no delimiter, and nul is set once a NUL byte was found before
	// the delimiter (see rdLine).
	scan int
	nul  bool
}

// NewReader returns a Reader of requests from r. Zero (or negative) fields
// of lim are replaced by the Redis defaults.
func NewReader(r io.Reader, lim Limits) *Reader {
	if lim.MaxBulkLen <= 0 {
		lim.MaxBulkLen = rdDefaultMaxBulkLen
	}
	if lim.MaxQueryLen <= 0 {
		lim.MaxQueryLen = rdDefaultMaxQueryLen
	}
	if lim.MaxInlineLen <= 0 {
		lim.MaxInlineLen = rdDefaultMaxInlineLen
	}
	// A line limit near MaxInt would overflow the +1/+2 arithmetic below;
	// no buffer could hold such a line anyway.
	if lim.MaxInlineLen > math.MaxInt/4 {
		lim.MaxInlineLen = math.MaxInt / 4
	}
	return &Reader{src: r, lim: lim, auth: true, bulk: -1}
}

// SetAuthenticated tells the reader whether the connection has
// authenticated; unauthenticated connections (when the server requires a
// password) get Redis' tighter limits: multibulk count > 10 ->
// "unauthenticated multibulk length", bulk length > 16384 ->
// "unauthenticated bulk length". New readers start authenticated (true).
// Like Redis' authRequired(), it is consulted each time a header is parsed.
func (r *Reader) SetAuthenticated(ok bool) { r.auth = ok }

// Buffered reports how many unconsumed bytes are buffered (part of a next
// command or several).
func (r *Reader) Buffered() int { return r.end - r.start }

// Read returns the next complete command's arguments. The returned slices
// alias the reader's buffer and are valid only until the next call to Read:
// callers that keep them (e.g. MULTI queues) must copy. Read blocks on the
// underlying reader only when no complete command is buffered. Errors:
// *ProtocolError, or the underlying reader's error (io.EOF etc., also when
// the stream ends inside a request: Buffered then tells it was partial).
//
// A *ProtocolError is sticky: every later call returns it, since the
// connection must be closed. An error of the underlying reader is returned
// as it is and the reader stays usable: the partial request is kept and the
// next Read calls the underlying reader again (so a read deadline that
// expired can be extended and the read retried).
//
// Requests Redis ignores without a reply (multibulk counts <= 0, empty
// inline lines) are skipped; Read never returns an empty command.
func (r *Reader) Read() ([][]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	// The previous command's slices are dead now, so the buffer may move.
	if r.start == r.end {
		r.start, r.end = 0, 0
		if cap(r.buf) > rdMaxKeep {
			r.buf = nil
		}
	}
	if r.left == 0 && (cap(r.args) > rdMaxKeepArgs || cap(r.offs) > 2*rdMaxKeepArgs) {
		r.args, r.offs = nil, nil
	}
	for {
		args, need, err := r.rdParse()
		if err != nil {
			r.err = err
			return nil, err
		}
		if args != nil {
			return args, nil
		}
		if err := r.rdFill(need); err != nil {
			return nil, err
		}
	}
}

// rdParse parses the buffered bytes. It returns a command, or a protocol
// error, or (nil, need, nil) when more input is needed; need is then the
// number of bytes from start that must be buffered to finish the current
// bulk, or 0 when that is not known (a line is incomplete).
func (r *Reader) rdParse() ([][]byte, int, error) {
	for {
		b := r.buf[r.start:r.end]
		if r.left == 0 {
			if len(b) == 0 {
				return nil, 0, nil
			}
			// processInputBuffer: '*' starts a multibulk request, any
			// other byte an inline one.
			if b[0] != '*' {
				args, done, err := r.rdInline(b)
				if err != nil || !done {
					return nil, 0, err
				}
				if len(args) == 0 {
					continue // empty line: no command, no reply
				}
				return args, 0, nil
			}
			ll, next, ok := rdFastHeader(b, 0, '*', r.lim.MaxInlineLen)
			if !ok {
				var err error
				if ll, next, err = r.rdHeader(b, 0, '*', "too big mbulk count string", "invalid multibulk length"); next < 0 {
					return nil, 0, err
				}
			}
			r.scan = 0
			if ll > rdMaxCount {
				return nil, 0, rdProtoErr("invalid multibulk length")
			}
			if ll > rdUnauthMaxCount && !r.auth {
				return nil, 0, rdProtoErr("unauthenticated multibulk length")
			}
			if ll <= 0 {
				// "*0" and "*-1" are consumed silently.
				r.start += next
				continue
			}
			// No slots are reserved for ll arguments: offs grows with the
			// bulks that actually arrive, so "*2000000000\r\n" costs nothing.
			r.left = int(ll)
			r.pos = next
			r.bulk = -1
			r.offs = r.offs[:0]
		}
		// The loop works on locals (the compiler keeps them in registers)
		// and saves them whenever it stops for more input.
		pos, left, bulk, offs := r.pos, r.left, r.bulk, r.offs
		for left > 0 {
			if bulk < 0 {
				ll, next, ok := rdFastHeader(b, pos, '$', r.lim.MaxInlineLen)
				if !ok {
					var err error
					if ll, next, err = r.rdHeader(b, pos, '$', "too big bulk count string", "invalid bulk length"); next < 0 {
						r.pos, r.left, r.bulk, r.offs = pos, left, bulk, offs
						return nil, 0, err
					}
				}
				r.scan = 0
				if ll < 0 || ll > r.lim.MaxBulkLen {
					return nil, 0, rdProtoErr("invalid bulk length")
				}
				if ll > rdUnauthMaxBulk && !r.auth {
					return nil, 0, rdProtoErr("unauthenticated bulk length")
				}
				pos, bulk = next, ll
			}
			// The payload is followed by two bytes that Redis skips
			// without checking that they are "\r\n"; so do we.
			if int64(len(b)-pos)-2 < bulk {
				r.pos, r.left, r.bulk, r.offs = pos, left, bulk, offs
				return nil, rdNeed(pos, bulk), nil
			}
			n := int(bulk)
			offs = append(offs, pos, pos+n)
			pos += n + 2
			bulk = -1
			left--
		}
		r.left, r.bulk, r.offs = 0, -1, offs
		args := r.args[:0]
		for k := 0; k+1 < len(offs); k += 2 {
			// Full slice expressions: an append by the caller must not
			// overwrite the next argument.
			args = append(args, b[offs[k]:offs[k+1]:offs[k+1]])
		}
		r.args = args
		r.start += pos
		r.pos = 0
		return args, 0, nil
	}
}

// rdHeader parses the header line at b[pos:], prefix ('*' or '$') and a
// number, when rdFastHeader could not. It returns the number and the offset
// just past the line (Redis skips the '\r' and the byte after it without
// looking at that byte), or next < 0 when more input is needed (err nil) or
// the line is bad (err set: the too-big error, "expected '$'", or invalid
// when the number does not parse). The caller checks the number's range: a
// number that parsed means the line held no NUL, so range errors need no
// NUL check.
func (r *Reader) rdHeader(b []byte, pos int, prefix byte, tooBig, invalid string) (ll int64, next int, err error) {
	i, err := r.rdLine(b, pos, '\r', tooBig)
	if i < 0 {
		return 0, -1, err
	}
	// b[pos] exists even when the line is empty (i == 0): it is then the
	// '\r' itself, which Redis reports.
	if c := b[pos]; c != prefix {
		if wait, err := r.rdNul(b, pos, i, tooBig); wait {
			return 0, -1, err
		}
		return 0, -1, rdProtoErr("expected '$', got '" + rdReplyByte(c) + "'")
	}
	v, ok := rdParseInt(b[pos+1 : pos+i])
	if !ok {
		if wait, err := r.rdNul(b, pos, i, tooBig); wait {
			return 0, -1, err
		}
		return 0, -1, rdProtoErr(invalid)
	}
	return v, pos + i + 2, nil
}

// rdFastHeader is the fast path for the usual header: the prefix, a short
// non-negative number without leading zeros, and "\r" plus one byte, all
// buffered, the '\r' within the line limit. One pass, no search; anything
// else (ok=false) goes the general way.
func rdFastHeader(b []byte, pos int, prefix byte, limit int) (v int64, next int, ok bool) {
	if pos >= len(b) || b[pos] != prefix {
		return 0, 0, false
	}
	i := pos + 1
	for i < len(b) && i-pos <= 18 { // 18 digits cannot overflow
		c := b[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + int64(c)
		i++
	}
	n := i - pos - 1
	if n == 0 || (n > 1 && b[pos+1] == '0') || i+1 >= len(b) || b[i] != '\r' || i-pos > limit {
		return 0, 0, false
	}
	return v, i + 2, true
}

// rdInline handles an inline request at the start of b (processInlineBuffer).
// It returns done=false when the line is not complete yet.
func (r *Reader) rdInline(b []byte) (args [][]byte, done bool, err error) {
	i, err := r.rdLine(b, 0, '\n', "too big inline request")
	if i < 0 {
		return nil, false, err
	}
	// Redis finds the newline with strchr, which stops at a NUL byte: a
	// NUL before the '\n' means "no line yet".
	if wait, err := r.rdNul(b, 0, i, "too big inline request"); wait {
		return nil, false, err
	}
	line := b[:i]
	if i > 0 && line[i-1] == '\r' {
		line = line[:i-1]
	}
	args, ok := rdSplitArgs(line, r.args[:0])
	if !ok {
		return nil, false, rdProtoErr("unbalanced quotes in request")
	}
	r.args = args
	r.start += i + 1
	r.scan = 0
	return args, true, nil
}

// rdLine looks for the delimiter that ends the line starting at b[pos:]:
// '\r' for multibulk headers, which Redis then requires to be followed by
// one more byte (of any value), or '\n' for inline requests. It returns the
// delimiter's index relative to pos, or -1 with a nil error when more input
// is needed, or -1 with the "too big" protocol error tooBig.
//
// Redis declares a line too big when more than PROTO_INLINE_MAX_SIZE bytes
// are buffered and strchr finds no delimiter. How much is buffered at that
// check depends on how the bytes were split into reads, so a given line may
// or may not pass in Redis; here the outcome is the one Redis gives when the
// bytes arrive one at a time, which does not depend on the split: the
// delimiter must be within the first MaxInlineLen+1 bytes of the line.
//
// The search resumes where the previous one stopped, so a line that
// arrives in many pieces is scanned once.
func (r *Reader) rdLine(b []byte, pos int, delim byte, tooBig string) (int, error) {
	avail := len(b) - pos
	limit := r.lim.MaxInlineLen
	tail := 0
	if delim == '\r' {
		tail = 1
	}
	if !r.nul {
		n := min(avail, limit+1)
		if r.scan < n {
			if j := bytes.IndexByte(b[pos+r.scan:pos+n], delim); j >= 0 {
				i := r.scan + j
				if i+tail < avail {
					return i, nil
				}
				// The byte after '\r' has not arrived.
				r.scan = i
				if avail > limit {
					if _, err := r.rdNul(b, pos, i, tooBig); err != nil {
						return -1, err
					}
				}
				return -1, nil
			}
			r.scan = n
		}
	}
	if avail > limit {
		return -1, rdProtoErr(tooBig)
	}
	return -1, nil
}

// rdNul reproduces Redis' use of strchr, which stops at a NUL byte: when
// b[pos:pos+i], the line before its delimiter, holds a NUL, Redis has not
// found the delimiter and waits for more input, or reports the line too big
// once more than MaxInlineLen bytes are buffered. It returns wait=true in
// that case, with the error if any. Callers use it only on paths that would
// otherwise fail, since a line that parses holds no NUL: the common path
// does not pay for the check.
func (r *Reader) rdNul(b []byte, pos, i int, tooBig string) (wait bool, err error) {
	if bytes.IndexByte(b[pos:pos+i], 0) < 0 {
		return false, nil
	}
	r.nul = true
	if len(b)-pos > r.lim.MaxInlineLen {
		return true, rdProtoErr(tooBig)
	}
	return true, nil
}

// rdFill reads more input. need, when not 0, is how many bytes from start
// the current bulk requires; it lets the buffer grow to exactly that size
// for a big bulk instead of doubling past it.
func (r *Reader) rdFill(need int) error {
	if r.pend != nil {
		err := r.pend
		r.pend = nil
		return err
	}
	// Move the partial request to the front. This happens at most once per
	// request (start is 0 afterwards), and only the partial tail moves.
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end >= r.maxQuery() {
		return ErrQueryTooBig
	}
	if r.end == len(r.buf) {
		r.rdGrow(need)
	}
	for range rdMaxEmptyReads {
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			return rdErrNegativeRead
		}
		r.end += n
		if err != nil {
			if n > 0 {
				// Use the data first; report the error when it is needed.
				r.pend = err
				return nil
			}
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

// maxQuery returns the query buffer limit in force.
func (r *Reader) maxQuery() int {
	if r.live != nil {
		if n := r.live.Load().MaxQueryLen; n > 0 {
			return n
		}
	}
	return r.lim.MaxQueryLen
}

// queryMem is what a Reader holds, in CLIENT LIST's terms (Redis 7.0's
// client fields, named after them).
type queryMem struct {
	qbuf     int // request bytes in the buffer not yet parsed into arguments
	free     int // room after them
	size     int // the buffer's size
	argvLen  int // the bytes of the arguments parsed
	argSlice int // the argument and offset slices' own memory
}

// mem returns what r holds between two commands, as Redis' query buffer
// and argv hold it then: the bytes of a request not fully arrived, less
// the arguments already parsed out of it, and those arguments.
func (r *Reader) mem() queryMem {
	m := r.bufMem()
	m.qbuf = r.end - r.start
	if r.left > 0 {
		m.qbuf -= r.pos
		for k := 0; k+1 < len(r.offs); k += 2 {
			m.argvLen += r.offs[k+1] - r.offs[k]
		}
	}
	return m
}

// memRunning returns what r holds while the command Read returned last
// runs, as Redis' query buffer and argv hold them then: every request
// since the last read (buf starts with the first of them; Redis trims its
// buffer once it has run them all), and the command's arguments.
func (r *Reader) memRunning() queryMem {
	m := r.bufMem()
	m.qbuf = r.end
	for _, a := range r.args {
		m.argvLen += len(a)
	}
	return m
}

// bufMem fills the sizes that do not depend on the request.
func (r *Reader) bufMem() queryMem {
	return queryMem{free: len(r.buf) - r.end, size: len(r.buf),
		argSlice: cap(r.args)*int(unsafe.Sizeof([]byte(nil))) + cap(r.offs)*int(unsafe.Sizeof(0))}
}

// release drops the buffers when no request is under way, so an idle
// connection does not keep them; the next read allocates them again. It
// returns how many bytes of buffer it dropped.
func (r *Reader) release() int {
	if r.start != r.end || r.left != 0 || r.err != nil {
		return 0
	}
	n := cap(r.buf)
	r.buf, r.start, r.end = nil, 0, 0
	r.args, r.offs = nil, nil
	return n
}

// rdGrow enlarges a full buffer, which then holds only the current request
// (rdFill moved it to the front). It doubles, so the buffer follows the
// bytes that actually arrived: an announced length alone ("$536870912\r\n"
// and then nothing) allocates nothing. When the current bulk is big
// compared to the buffer and its end is within 2.5 times the bytes already
// there, the buffer grows to exactly the bulk's end instead (Redis'
// PROTO_MBULK_BIG_ARG path sizes its buffer the same way), so a bulk of
// MaxBulkLen does not end up in a buffer of twice that. Growing to the
// bulk's end happens at most once per such bulk, and the bulk is at least
// half the old buffer, so the copying stays linear in the input.
func (r *Reader) rdGrow(need int) {
	old := len(r.buf)
	size := max(2*old, rdMinBuf)
	if need > old && old >= rdMinBuf && r.bulk >= int64(old/2) && need <= size+size/4 {
		size = need
	}
	nb := make([]byte, size)
	copy(nb, r.buf[r.start:r.end])
	r.end -= r.start
	r.start = 0
	r.buf = nb
}

// rdNeed is pos + bulk + 2 (the bulk's end and its skipped CRLF), clamped
// so it cannot overflow an int.
func rdNeed(pos int, bulk int64) int {
	if bulk > int64(math.MaxInt-2-pos) {
		return math.MaxInt
	}
	return pos + int(bulk) + 2
}

// rdProtoErr builds a fresh error so callers may keep or change it.
func rdProtoErr(msg string) error { return &ProtocolError{Msg: msg} }

// rdReplyByte renders the byte in "expected '$', got '%c'" as Redis does:
// the raw byte, except that addReplyErrorFormat turns '\r' and '\n' into
// spaces so the reply stays one line.
func rdReplyByte(c byte) string {
	if c == '\r' || c == '\n' {
		c = ' '
	}
	return string([]byte{c})
}

// rdParseInt is Redis' string2ll: an optional '-', then either "0" alone or
// a digit 1-9 followed by digits; no '+', no spaces, no leading zeros (so
// "-0" and "01" fail), at most 20 bytes, and within int64.
func rdParseInt(s []byte) (int64, bool) {
	n := len(s)
	if n == 0 || n >= 21 {
		return 0, false
	}
	if n == 1 && s[0] == '0' {
		return 0, true
	}
	i := 0
	neg := s[0] == '-'
	if neg {
		i = 1
		if n == 1 {
			return 0, false
		}
	}
	if s[i] < '1' || s[i] > '9' {
		return 0, false
	}
	v := uint64(s[i] - '0')
	for i++; i < n; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > math.MaxUint64/10 {
			return 0, false
		}
		v *= 10
		d := uint64(c - '0')
		if v > math.MaxUint64-d {
			return 0, false
		}
		v += d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true // -(1<<63) wraps to MinInt64, as intended
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// rdIsSpace is C's isspace in the "C" locale (Redis never sets LC_CTYPE).
func rdIsSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

func rdIsHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func rdHexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// rdSplitArgs is Redis' sdssplitargs applied to line, appending the
// arguments to args. It returns ok=false where sdssplitargs returns NULL
// (unbalanced quotes, or a closing quote followed by something other than
// a space).
//
// The unescaped arguments are written over line itself: every input byte
// yields at most one output byte, so the write position never passes the
// read position, and the arguments alias the buffer without allocating.
// line holds no NUL (rdNul saw to that), so the C code's end-of-string tests
// become end-of-slice tests (at returns 0 past the end).
//
// Quirks kept from the C code: leading blanks are skipped with isspace
// (which includes \v and \f) but an unquoted argument ends only at ' ',
// \t, \r or \n; a quote inside an unquoted argument opens a quoted part
// (a"b c" is one argument, ab c); in double quotes an unknown escape
// yields the escaped byte itself and \x needs two hex digits, else it is
// the letter x; in single quotes only \' is an escape.
func rdSplitArgs(line []byte, args [][]byte) ([][]byte, bool) {
	n := len(line)
	at := func(i int) byte {
		if i < n {
			return line[i]
		}
		return 0
	}
	p, w := 0, 0
	for {
		for p < n && rdIsSpace(line[p]) {
			p++
		}
		if p >= n {
			return args, true
		}
		start := w
		// Fast path: a run of ordinary bytes outside quotes, the usual
		// argument. The state machine below takes over at the first byte
		// that is not ordinary, exactly where the C loop would be.
		for p < n {
			c := line[p]
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '"' || c == '\'' {
				break
			}
			line[w] = c
			w++
			p++
		}
		inq, insq, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && rdIsHex(at(p+2)) && rdIsHex(at(p+3)):
					line[w] = rdHexVal(at(p+2))<<4 | rdHexVal(at(p+3))
					w++
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					switch e := line[p]; e {
					case 'n':
						line[w] = '\n'
					case 'r':
						line[w] = '\r'
					case 't':
						line[w] = '\t'
					case 'b':
						line[w] = '\b'
					case 'a':
						line[w] = '\a'
					default:
						line[w] = e
					}
					w++
				case c == '"':
					// The closing quote must be followed by a space or
					// the end of the line.
					if nx := at(p + 1); nx != 0 && !rdIsSpace(nx) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false // unterminated quotes
				default:
					line[w] = c
					w++
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					line[w] = '\''
					w++
				case c == '\'':
					if nx := at(p + 1); nx != 0 && !rdIsSpace(nx) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					line[w] = c
					w++
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					line[w] = c
					w++
				}
			}
			if p < n {
				p++
			}
		}
		args = append(args, line[start:w:w])
	}
}
