package resp

import (
	"bytes"
	"errors"
	"strconv"
)

// ErrReply is returned by ReplyLen for bytes that are not a RESP reply.
var ErrReply = errors.New("resp: malformed reply")

// maxReplyDepth bounds the nesting ReplyLen follows.
const maxReplyDepth = 64

// ReplyLen returns the length of the complete RESP2 or RESP3 reply at the
// start of b, or 0 when b holds only the beginning of one. A node that
// relays another's replies (a Raft follower forwarding to its leader) uses
// it to cut the stream into replies without decoding them.
func ReplyLen(b []byte) (int, error) { return replyLen(b, 0) }

func replyLen(b []byte, depth int) (int, error) {
	if depth > maxReplyDepth {
		return 0, ErrReply
	}
	eol := bytes.Index(b, []byte("\r\n"))
	if eol < 0 {
		return 0, nil
	}
	if eol == 0 {
		return 0, ErrReply
	}
	line := b[1:eol]
	n := eol + 2
	switch b[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return n, nil
	}
	count, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil || count < -1 || count > 1<<32 {
		return 0, ErrReply
	}
	switch b[0] {
	case '$', '!', '=': // bulk string, bulk error, verbatim string
		if count < 0 {
			return n, nil
		}
		end := n + int(count) + 2
		if len(b) < end {
			return 0, nil
		}
		if b[end-2] != '\r' || b[end-1] != '\n' {
			return 0, ErrReply
		}
		return end, nil
	case '*', '~', '>', '%', '|': // array, set, push, map, attribute
		if b[0] == '%' || b[0] == '|' {
			count *= 2
		}
		for range count {
			m, err := replyLen(b[n:], depth+1)
			if m == 0 || err != nil {
				return 0, err
			}
			n += m
		}
		if b[0] == '|' { // an attribute precedes the reply it describes
			m, err := replyLen(b[n:], depth+1)
			if m == 0 || err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	}
	return 0, ErrReply
}
