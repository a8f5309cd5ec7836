// Package hostport checks the host:port addresses a node is given for other
// nodes (--peers, --announce-addr), so that a typo stops the start with a
// message instead of a node that dials nothing forever.
package hostport

import (
	"fmt"
	"net"
	"strconv"
)

// Check returns an error naming what is wrong with addr unless it is
// host:port with a host and a port from 1 to 65535. A port name such as
// "redis" is refused too: Go would resolve it, but the peer lists of the
// other members would not agree with what an operator reads.
func Check(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q: the host is missing", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", addr)
	}
	return nil
}

// Dialable is Check, and refuses a wildcard host too: an address given
// for another node (--peers, CRDT PEER ADD) must name the one host to dial.
func Dialable(addr string) error {
	if err := Check(addr); err != nil {
		return err
	}
	if Wildcard(addr) {
		return fmt.Errorf("%q: a wildcard host names no node to dial: give the host the node is reached at", addr)
	}
	return nil
}

// Wildcard reports whether addr's host is an unspecified address (0.0.0.0,
// ::), which listens on every interface but names none another host can
// dial.
func Wildcard(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsUnspecified()
}
