package commands

import (
	"bytes"
	"strings"
)

// Reply texts of errors, Redis 7's exact words, which clients match on.
const (
	errSyntax        = "ERR syntax error"
	errNoMulti       = "ERR Command not allowed inside a transaction"
	errNotInt        = "ERR value is not an integer or out of range"
	errOverflow      = "ERR increment or decrement would overflow"
	errWrongType     = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNoAuth        = "NOAUTH Authentication required."
	errWrongPass     = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassword    = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errHelloNoAuth   = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	errNoProto       = "NOPROTO unsupported protocol version"
	errProtoVersion  = "ERR Protocol version is not an integer or out of range"
	errDBRange       = "ERR DB index is out of range"
	errNested        = "ERR MULTI calls can not be nested"
	errExecNoMulti   = "ERR EXEC without MULTI"
	errDiscardNoMult = "ERR DISCARD without MULTI"
	errExecAbort     = "EXECABORT Transaction discarded because of previous errors."
	errOOM           = "OOM command not allowed when used memory > 'maxmemory'."
	errWatchInMulti  = "ERR WATCH inside MULTI is not allowed"
	errClusterOff    = "ERR This instance has cluster support disabled"
	errClientName    = "ERR Client names cannot contain spaces, newlines or special characters."
	errExpireFlags   = "ERR NX and XX, GT or LT options at the same time are not compatible"
)

// wrongArity is Redis' reply for a bad argument count; name is the command's
// lower-case name ("get", "config|get").
func wrongArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// unknownSubcommand is Redis' reply for a container command given a
// subcommand it does not have.
func unknownSubcommand(sub []byte, cmd string) string {
	return "ERR unknown subcommand '" + sanitize(string(sub), 128) + "'. Try " + cmd + " HELP."
}

// unknownCommand is Redis 7's reply for a command it does not know: the name
// and up to 128 bytes of its first arguments, each quoted and followed by a
// space.
func unknownCommand(args [][]byte) string {
	var rest []byte
	for _, a := range args[1:] {
		if len(rest) >= 128 {
			break
		}
		a = cString(a)
		room := 128 - len(rest)
		if len(a) > room {
			a = a[:room]
		}
		rest = append(rest, '\'')
		rest = append(rest, a...)
		rest = append(rest, '\'', ' ')
	}
	return "ERR unknown command '" + sanitize(string(args[0]), 128) + "', with args beginning with: " + sanitize(string(rest), len(rest))
}

// cString is b up to its first NUL byte, what C's "%s" prints of it.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// sanitize cuts s to n bytes and replaces CR and LF, which cannot appear in an
// error line, with spaces (Redis does the same). Like Redis, which formats
// these texts with C's "%s", it also ends s at its first NUL byte.
func sanitize(s string, n int) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n]
	}
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}
