package compat

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/internal/netns"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testcert"
	"github.com/throttleddb/throttled/server"
)

// remoteClient connects to argv[1]:argv[2], over TLS when argv[3:6] name
// a CA, a certificate and its key, sends its stdin and prints every byte
// that comes back until the server closes the connection.
const remoteClient = `
import socket, ssl, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
if len(sys.argv) > 3:
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    ctx.check_hostname = False  # the certificate names 127.0.0.1, not this address
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
    s = ctx.wrap_socket(s)
s.sendall(sys.stdin.buffer.read())
out = b""
while True:
    try:
        b = s.recv(65536)
    except ConnectionResetError:
        break
    if not b:
        break
    out += b
sys.stdout.buffer.write(out)
`

// protectedTarget is a server bound to loopback and to the host side of
// the test's namespace.
type protectedTarget struct {
	loop   string // loopback address, for the test's own commands
	remote string // the address the namespace reaches
	tls    string // the TLS address the namespace reaches
}

// TestProtectedMode: a client from another address than loopback, in a
// network namespace the test makes, gets from throttled the bytes it gets
// from redis-server 7.0.15: Redis' DENIED explanation while protected-mode
// is yes and there is no password (also over TLS), NOAUTH once there is
// one, and service with protected-mode no; CONFIG SET protected-mode and
// requirepass apply to the next connection; INFO counts the refusals as
// rejected.
func TestProtectedMode(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 for the client in the namespace")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	ns := netns.New(t)
	certs := testcert.Make(t)
	bind := "127.0.0.1 " + ns.Host
	tlsFiles := []string{"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CACert}

	start := map[string]func(t *testing.T, args ...string) protectedTarget{
		"redis": func(t *testing.T, args ...string) protectedTarget {
			tport, err := proc.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			extra := append([]string{"--bind", bind, "--tls-port", strconv.Itoa(tport)}, tlsFiles...)
			loop := startRedis(t, "", append(extra, args...)...)
			_, port, _ := net.SplitHostPort(loop)
			return protectedTarget{loop: loop, remote: net.JoinHostPort(ns.Host, port), tls: net.JoinHostPort(ns.Host, strconv.Itoa(tport))}
		},
		"throttled": func(t *testing.T, args ...string) protectedTarget {
			cfg := server.Config{Bind: bind, TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert}
			for i := 0; i < len(args); i += 2 {
				switch args[i] {
				case "--protected-mode":
					cfg.NoProtectedMode = args[i+1] == "no"
				case "--requirepass":
					cfg.RequirePass = args[i+1]
				}
			}
			n := e2eNode(t, cfg)
			_, port, _ := net.SplitHostPort(n.Addr())
			_, tport, _ := net.SplitHostPort(n.TLSAddr())
			return protectedTarget{loop: n.Addr(), remote: net.JoinHostPort(ns.Host, port), tls: net.JoinHostPort(ns.Host, tport)}
		},
	}
	// remote sends in from the namespace to addr and returns the reply.
	remote := func(t *testing.T, addr, in string, tls bool) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		args := []string{"-c", remoteClient, host, port}
		if tls {
			args = append(args, certs.CACert, certs.ClientCert, certs.ClientKey)
		}
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		cmd := ns.Command(ctx, py, args...)
		cmd.Stdin = strings.NewReader(in)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("client in the namespace: %v\n%s", err, errOut.String())
		}
		return out.String()
	}
	// local runs a command on the loopback address, after AUTH pass when
	// there is one.
	local := func(t *testing.T, addr, pass string, args ...string) string {
		t.Helper()
		c := e2eDial(t, addr)
		defer c.Close()
		if pass != "" {
			e2eMustDo(t, c, "+OK\r\n", "AUTH", pass)
		}
		reply, err := c.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}

	// Each step's reply must be the same from both servers; want, when
	// set, is what that is.
	type step struct {
		name, in string
		tls      bool
		config   []string // CONFIG SET name value, from loopback, first
		want     string
	}
	const quit = "PING\r\nQUIT\r\n"
	for _, tc := range []struct {
		name  string
		args  []string
		pass  string
		steps []step
	}{
		{"protected", nil, "", []step{
			{name: "denied", want: "<DENIED>"},
			{name: "denied over TLS", tls: true, want: "<DENIED>"},
			{name: "set off at run time", in: quit, config: []string{"protected-mode", "no"}, want: "+PONG\r\n+OK\r\n"},
			{name: "set on again", config: []string{"protected-mode", "yes"}, want: "<DENIED>"},
			{name: "a password lifts it", in: quit, config: []string{"requirepass", "pw"}, want: "-NOAUTH Authentication required.\r\n+OK\r\n"},
		}},
		{"requirepass", []string{"--requirepass", "pw"}, "pw", []step{
			{name: "noauth", in: quit, want: "-NOAUTH Authentication required.\r\n+OK\r\n"},
			{name: "auth", in: "AUTH pw\r\nPING\r\nQUIT\r\n", tls: true, want: "+OK\r\n+PONG\r\n+OK\r\n"},
		}},
		{"off", []string{"--protected-mode", "no"}, "", []step{
			{name: "served", in: quit, want: "+PONG\r\n+OK\r\n"},
			{name: "served over TLS", in: quit, tls: true, want: "+PONG\r\n+OK\r\n"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets := map[string]protectedTarget{}
			for name, st := range start {
				targets[name] = st(t, tc.args...)
			}
			pass := tc.pass
			for _, s := range tc.steps {
				got := map[string]string{}
				for name, tg := range targets {
					if s.config != nil {
						if r := local(t, tg.loop, pass, append([]string{"CONFIG", "SET"}, s.config...)...); r != "+OK\r\n" {
							t.Fatalf("%s: %s: CONFIG SET %v = %q", s.name, name, s.config, r)
						}
					}
					addr := tg.remote
					if s.tls {
						addr = tg.tls
					}
					got[name] = remote(t, addr, s.in, s.tls)
				}
				if s.config != nil && s.config[0] == "requirepass" {
					pass = s.config[1]
				}
				if got["throttled"] != got["redis"] {
					t.Errorf("%s: throttled sent %q\nredis-server sent %q", s.name, got["throttled"], got["redis"])
				}
				want := s.want
				if want == "<DENIED>" {
					want = got["redis"]
					if !strings.HasPrefix(want, "-DENIED Redis is running in protected mode") || !strings.HasSuffix(want, "\r\n") {
						t.Errorf("%s: redis-server sent %q, not its DENIED line", s.name, want)
					}
				}
				if got["throttled"] != want {
					t.Errorf("%s: throttled sent %q, want %q", s.name, got["throttled"], want)
				}
			}
			rejected := map[string]string{}
			for name, tg := range targets {
				rejected[name] = e2eInfoField(local(t, tg.loop, pass, "INFO", "stats"), "rejected_connections")
			}
			if rejected["throttled"] != rejected["redis"] {
				t.Errorf("rejected_connections: throttled %s, redis-server %s", rejected["throttled"], rejected["redis"])
			}
		})
	}
}
