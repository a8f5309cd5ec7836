//go:build unix

package resp

import (
	"fmt"
	"net"
	"syscall"
	"testing"
)

// TestLimits_InfoNow: a handler sees its own connection's buffers as they
// are while its command runs, as Redis shows the client that runs CLIENT
// INFO: qbuf holds the requests of the batch (the running one too),
// argv-mem its arguments, rbp the replies built before it; fd is the
// descriptor of the connection's socket in this process.
func TestLimits_InfoNow(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		_, addr := start(t, newTestHandler(), set)
		c := dial(t, addr)
		// PING (6 bytes inline) and CLIENTINFO x (28 bytes) in one write.
		c.send("PING", "*2", "$10", "CLIENTINFO", "$1", "x")
		c.expect("+PONG")
		var fd, qbuf, argv, rbs, rbp int
		if _, err := fmt.Sscanf(c.reply(), "+fd=%d qbuf=%d argv-mem=%d rbs=%d rbp=%d", &fd, &qbuf, &argv, &rbs, &rbp); err != nil {
			t.Fatal(err)
		}
		if qbuf != 34 || argv != 11 || rbp < len("+PONG\r\n") || rbs < rbp {
			t.Errorf("qbuf=%d argv-mem=%d rbs=%d rbp=%d, want 34, 11, and PONG's reply within the peak and the buffer", qbuf, argv, rbs, rbp)
		}
		peer, err := syscall.Getpeername(fd)
		if err != nil {
			t.Fatalf("fd=%d: %v", fd, err)
		}
		if sa, ok := peer.(*syscall.SockaddrInet4); !ok || sa.Port != c.nc.LocalAddr().(*net.TCPAddr).Port {
			t.Errorf("fd=%d is connected to %v, want the client %v", fd, peer, c.nc.LocalAddr())
		}
	})
}
