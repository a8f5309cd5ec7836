package resp

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestKeepAlive: tcp-keepalive sets Redis' probes on an accepted socket
// (idle d, then every d/3, three of them); 0 turns them off.
func TestKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		d                    time.Duration
		on, idle, intvl, cnt int
	}{{300 * time.Second, 1, 300, 100, 3}, {0, 0, -1, -1, -1}} {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		setKeepAlive(sc, tc.d)
		rc, err := sc.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		rc.Control(func(fd uintptr) {
			get := func(level, opt int) int {
				v, err := syscall.GetsockoptInt(int(fd), level, opt)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			on := get(syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
			if on != tc.on {
				t.Errorf("tcp-keepalive %v: SO_KEEPALIVE %d, want %d", tc.d, on, tc.on)
			}
			if tc.on == 0 {
				return
			}
			idle, intvl, cnt := get(syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE), get(syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL), get(syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT)
			if idle != tc.idle || intvl != tc.intvl || cnt != tc.cnt {
				t.Errorf("tcp-keepalive %v: idle %d, interval %d, count %d; want %d, %d, %d", tc.d, idle, intvl, cnt, tc.idle, tc.intvl, tc.cnt)
			}
		})
	}
}
