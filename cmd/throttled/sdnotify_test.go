package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
)

// TestRun_NotifiesSystemd runs the binary as systemd's Type=notify would:
// with NOTIFY_SOCKET naming a unix datagram socket the test listens on. It
// must say READY=1 once it answers (a PING right after gets PONG), and
// STOPPING=1 when SIGTERM stops it.
func TestRun_NotifiesSystemd(t *testing.T) {
	bin := throttledBinary(t)
	// A socket path must fit in 108 bytes: t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--dir", t.TempDir())
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	next := func() string {
		t.Helper()
		buf := make([]byte, 512)
		l.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := l.Read(buf)
		if err != nil {
			t.Fatalf("no notice from the server: %v; log:\n%s", err, stderr.String())
		}
		return string(buf[:n])
	}
	ready := next()
	if want := "READY=1\nMAINPID=" + strconv.Itoa(cmd.Process.Pid); ready != want {
		t.Fatalf("first notice %q, want %q", ready, want)
	}
	c, err := net.Dial("tcp", proc.Addr(port))
	if err != nil {
		t.Fatalf("READY=1 came before the port accepted: %v", err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("PING\r\n"))
	buf := make([]byte, 7)
	n, _ := c.Read(buf)
	c.Close()
	if string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING after READY=1 answered %q", buf[:n])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "STOPPING=1" {
		t.Fatalf("notice on SIGTERM %q, want STOPPING=1", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
}
