// Package respconn is a minimal RESP2 client for the benchmark tools: enough to
// PING a server, load a script and check a few replies; Parse reads a reply
// received otherwise (a Raft member's, through its forwarder). It is not a general
// client (no pooling, no RESP3, no pipelining) and is not safe for concurrent
// use.
package respconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Error is an error reply from the server (the text after '-').
type Error string

func (e Error) Error() string { return string(e) }

// Conn is one connection to a RESP server.
type Conn struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// Dial connects to addr. timeout bounds the dial and every later Do call.
func Dial(ctx context.Context, addr string, timeout time.Duration) (*Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c), timeout: timeout}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Do sends one command and reads its reply. Replies map to Go values as:
// simple and bulk strings -> string, integers -> int64, arrays -> []any,
// null bulk/array -> nil. An error reply is returned as the error (of type
// Error) with a nil value; I/O and protocol failures are other errors.
func (c *Conn) Do(args ...string) (any, error) {
	if c.timeout > 0 {
		if err := c.c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return nil, err
	}
	v, err := c.read()
	if err != nil {
		return nil, err
	}
	if e, ok := v.(Error); ok {
		return nil, e
	}
	return v, nil
}

// Parse reads reply, one whole reply as a server sends it, into the values
// Do returns; an error reply is returned as the error (of type Error).
func Parse(reply []byte) (any, error) {
	c := &Conn{r: bufio.NewReader(bytes.NewReader(reply))}
	v, err := c.read()
	switch {
	case err != nil:
		return nil, err
	case c.r.Buffered() > 0:
		return nil, fmt.Errorf("%w: %d bytes after the reply", errProtocol, c.r.Buffered())
	}
	if e, ok := v.(Error); ok {
		return nil, e
	}
	return v, nil
}

var errProtocol = errors.New("respconn: protocol error")

func (c *Conn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(s) < 3 || s[len(s)-2] != '\r' {
		return "", fmt.Errorf("%w: bad line %q", errProtocol, s)
	}
	return s[:len(s)-2], nil
}

func (c *Conn) read() (any, error) {
	l, err := c.line()
	if err != nil {
		return nil, err
	}
	body := l[1:]
	switch l[0] {
	case '+':
		return body, nil
	case '-':
		return Error(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %q", errProtocol, body)
		}
		return n, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("%w: bad bulk length %q", errProtocol, body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("%w: bad array length %q", errProtocol, body)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unexpected type byte %q", errProtocol, l[0])
}

// Ints converts an array reply of integers (such as CL.THROTTLE's) to a slice.
func Ints(v any) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reply is %T, not an array", v)
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("reply element %d is %T, not an integer", i, e)
		}
		out[i] = n
	}
	return out, nil
}

// Info dials addr once and returns the name:value lines of INFO section.
func Info(ctx context.Context, addr, section string) (map[string]string, error) {
	c, err := Dial(ctx, addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.Do("INFO", section)
	if err != nil {
		return nil, err
	}
	text, _ := v.(string)
	out := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// Ping dials addr once and wants PONG (or NOAUTH: a server that wants AUTH
// first is up all the same) to a PING.
func Ping(ctx context.Context, addr string) error {
	c, err := Dial(ctx, addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.Do("PING")
	var e Error
	if errors.As(err, &e) && strings.HasPrefix(string(e), "NOAUTH") {
		return nil
	}
	if err != nil {
		return err
	}
	if v != "PONG" {
		return fmt.Errorf("PING answered %v", v)
	}
	return nil
}
