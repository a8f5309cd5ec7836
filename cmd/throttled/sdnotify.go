package main

import (
	"log/slog"
	"net"
	"os"
)

// sdNotify sends state (READY=1, STOPPING=1) to systemd when it supervises
// the process with Type=notify: systemd names its socket, a unix datagram
// socket, in NOTIFY_SOCKET (a leading @ is Linux's abstract namespace).
// Without NOTIFY_SOCKET it does nothing. A failure is logged, not fatal:
// the server serves whether or not systemd heard it.
func sdNotify(state string, log *slog.Logger) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err == nil {
		_, err = c.Write([]byte(state))
		c.Close()
	}
	if err != nil {
		log.Warn("could not notify systemd", "state", state, "socket", os.Getenv("NOTIFY_SOCKET"), "err", err)
	}
}
