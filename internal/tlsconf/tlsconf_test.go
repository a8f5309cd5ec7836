package tlsconf_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testcert"
	"github.com/throttleddb/throttled/internal/tlsconf"
)

func member(t *testing.T, cert, key, ca string) *tlsconf.Certs {
	t.Helper()
	c, err := tlsconf.Load(tlsconf.Files{CertFile: cert, KeyFile: key, CAFile: ca, Replication: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// echoServer serves one line back on each connection, over the member
// listener of c; it returns the address.
func echoServer(t *testing.T, c *tlsconf.Certs) string {
	t.Helper()
	ln, err := tlsconf.Listen("127.0.0.1:0", c.MemberServer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(conn).ReadString('\n')
				if err == nil {
					io.WriteString(conn, line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func echo(addr string, cfg *tls.Config) error {
	conn, err := tlsconf.Dial(addr, 5*time.Second, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		return err
	}
	_, err = bufio.NewReader(conn).ReadString('\n')
	return err
}

// TestMembers: members of one CA talk; a member of another CA, and a client
// without a certificate, get no further than the handshake, whichever side
// they are on.
func TestMembers(t *testing.T) {
	f := testcert.Make(t)
	ours := member(t, f.ServerCert, f.ServerKey, f.CACert)
	theirs := member(t, f.OtherServerCert, f.OtherServerKey, f.OtherCACert)
	addr := echoServer(t, ours)
	if err := echo(addr, member(t, f.ServerCert, f.ServerKey, f.CACert).MemberClient()); err != nil {
		t.Fatalf("member of the same CA: %v", err)
	}
	if err := echo(addr, theirs.MemberClient()); err == nil {
		t.Error("member of another CA dialing in: the exchange succeeded, want it refused")
	}
	// A client that trusts our CA but shows no certificate.
	anon := f.Anonymous()
	if err := echo(addr, anon); err == nil {
		t.Error("client without a certificate: the exchange succeeded, want it refused")
	}
	// Our member dialing a listener of the other CA refuses its certificate.
	if err := echo(echoServer(t, theirs), ours.MemberClient()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("dialing a member of another CA: %v, want a certificate error", err)
	}
	// The host name is not checked: the test certificate names 127.0.0.1,
	// and "localhost" dials fine too; the CA is what admits a member.
	_, port, _ := net.SplitHostPort(addr)
	if err := echo(net.JoinHostPort("localhost", port), ours.MemberClient()); err != nil {
		t.Errorf("by another name: %v", err)
	}
}

// TestLoad_Errors: what tls-replication needs is checked at load, each with
// a line that says what is missing.
func TestLoad_Errors(t *testing.T) {
	f := testcert.Make(t)
	for _, tc := range []struct {
		name  string
		files tlsconf.Files
		want  string
	}{
		{"no CA", tlsconf.Files{CertFile: f.ServerCert, KeyFile: f.ServerKey, Replication: true}, "tls-replication yes needs tls-ca-cert-file"},
		{"no CA for clients", tlsconf.Files{CertFile: f.ServerCert, KeyFile: f.ServerKey}, "tls-auth-clients yes needs tls-ca-cert-file"},
		{"client-only certificate", tlsconf.Files{CertFile: f.ClientCert, KeyFile: f.ClientKey, CAFile: f.CACert, Replication: true}, "server (serverAuth) use"},
		{"another CA's certificate", tlsconf.Files{CertFile: f.OtherServerCert, KeyFile: f.OtherServerKey, CAFile: f.CACert, Replication: true}, "does not verify against tls-ca-cert-file"},
		{"no key", tlsconf.Files{CertFile: f.ServerCert, CAFile: f.CACert}, "tls-cert-file and tls-key-file"},
		{"mismatched key", tlsconf.Files{CertFile: f.ServerCert, KeyFile: f.ClientKey, CAFile: f.CACert}, "tls-cert-file, tls-key-file"},
		{"bad auth", tlsconf.Files{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CACert, AuthClients: "maybe"}, "yes, no or optional"},
	} {
		if _, err := tlsconf.Load(tc.files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestReload: after Reload, new handshakes on configs handed out before
// use the new certificates; a reload that fails changes nothing.
func TestReload(t *testing.T) {
	f := testcert.Make(t)
	c, err := tlsconf.Load(tlsconf.Files{CertFile: f.ServerCert, KeyFile: f.ServerKey, CAFile: f.CACert})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c.ClientPort())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				conn.(*tls.Conn).Handshake()
				conn.Close()
			}()
		}
	}()
	handshake := func(cfg *tls.Config) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := handshake(f.Client()); err != nil {
		t.Fatalf("before the reload: %v", err)
	}
	if err := c.Reload(tlsconf.Files{CertFile: f.ServerCert, KeyFile: f.OtherKey, CAFile: f.CACert}); err == nil {
		t.Fatal("reload with a key of another certificate: no error")
	}
	if err := handshake(f.Client()); err != nil {
		t.Fatalf("after a failed reload: %v, want the old certificate still served", err)
	}
	// The other CA's certificate and CA: a client that trusts only the
	// first CA no longer accepts the server.
	if err := c.Reload(tlsconf.Files{CertFile: f.OtherServerCert, KeyFile: f.OtherServerKey, CAFile: f.OtherCACert, AuthClients: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := handshake(f.Client()); err == nil {
		t.Error("after the reload, a client trusting only the old CA connected: the old certificate is still served")
	}
	if got := c.Files().CertFile; got != f.OtherServerCert {
		t.Errorf("Files().CertFile = %q, want %q", got, f.OtherServerCert)
	}
}
