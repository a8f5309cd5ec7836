package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testcert"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

func tlsNode(t *testing.T, certs testcert.Files, auth string) *server.Node {
	t.Helper()
	return servertest.Start(t, server.Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey,
		TLSCACertFile: certs.CACert, TLSAuthClients: auth})
}

func client(t *testing.T, addr string, tc *tls.Config) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tc, MaxRetries: -1, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTLS_BesidePlain: tls-port serves beside port, on the same keyspace;
// the commands answer over TLS as over plain TCP.
func TestTLS_BesidePlain(t *testing.T) {
	certs := testcert.Make(t)
	n := tlsNode(t, certs, "")
	ctx := context.Background()
	sec, plain := client(t, n.TLSAddr(), certs.Client()), client(t, n.Addr(), nil)
	if err := sec.Set(ctx, "k", "over tls", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if got, err := plain.Get(ctx, "k").Result(); err != nil || got != "over tls" {
		t.Fatalf("GET over TCP = %q, %v; want what TLS set", got, err)
	}
	for _, c := range []*redis.Client{sec, plain} {
		got, err := c.Do(ctx, "CL.THROTTLE", "u", 15, 30, 60).Slice()
		if err != nil || len(got) != 5 {
			t.Fatalf("CL.THROTTLE = %v, %v", got, err)
		}
	}
	list, err := sec.ClientList(ctx).Result()
	if err != nil || strings.Count(list, "\n") != 2 {
		t.Fatalf("CLIENT LIST = %q, %v; want both clients", list, err)
	}
	got, err := plain.ConfigGet(ctx, "tls-*").Result()
	if err != nil || got["tls-auth-clients"] != "yes" || got["tls-cert-file"] != certs.ServerCert || got["tls-port"] == "0" {
		t.Fatalf("CONFIG GET tls-* = %v, %v", got, err)
	}
}

// TestTLS_AuthClients: tls-auth-clients yes wants a certificate the CA
// signed, optional takes one or none but never a bad one, no asks for none.
func TestTLS_AuthClients(t *testing.T) {
	certs := testcert.Make(t)
	other := certs.Anonymous()
	otherCert, err := tls.LoadX509KeyPair(certs.OtherCert, certs.OtherKey)
	if err != nil {
		t.Fatal(err)
	}
	// Sent whatever the server asks for: Go's client would otherwise keep
	// a certificate the server's CAs did not sign to itself.
	other.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &otherCert, nil }
	clients := map[string]*tls.Config{"signed": certs.Client(), "none": certs.Anonymous(), "other CA": other}
	for _, tc := range []struct {
		auth string
		ok   []string
	}{
		{"yes", []string{"signed"}},
		{"optional", []string{"signed", "none"}},
		{"no", []string{"signed", "none", "other CA"}},
	} {
		t.Run(tc.auth, func(t *testing.T) {
			n := tlsNode(t, certs, tc.auth)
			for name, cfg := range clients {
				err := client(t, n.TLSAddr(), cfg).Ping(context.Background()).Err()
				want := false
				for _, ok := range tc.ok {
					want = want || ok == name
				}
				if (err == nil) != want {
					t.Errorf("client with %s certificate: PING error %v, want success %v", name, err, want)
				}
			}
		})
	}
}

// TestTLS_PortZero: port 0 turns plain TCP off, as in Redis; with tls-port
// 0 too the node refuses to start.
func TestTLS_PortZero(t *testing.T) {
	certs := testcert.Make(t)
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	n, err := server.Start(server.Config{Bind: "127.0.0.1", TLSPort: port, TLSCertFile: certs.ServerCert,
		TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Addr() != "" {
		t.Errorf("Addr = %q with port 0, want none", n.Addr())
	}
	c := client(t, n.TLSAddr(), certs.Client())
	if got, err := c.ConfigGet(context.Background(), "port").Result(); err != nil || got["port"] != "0" {
		t.Errorf("CONFIG GET port = %v, %v; want 0", got, err)
	}
	if _, err := server.Start(server.Config{}); err == nil || !strings.Contains(err.Error(), "listen nowhere") {
		t.Errorf("start with port 0 and no tls-port: %v, want an error", err)
	}
}

// TestTLS_Config: a TLS port without its files, or a CA missing where
// clients must show certificates, stops the start, as Redis refuses it.
func TestTLS_Config(t *testing.T) {
	certs := testcert.Make(t)
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no key", server.Config{TLSCertFile: certs.ServerCert}, "tls-key-file"},
		{"no CA", server.Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey}, "tls-ca-cert-file"},
		{"bad auth", server.Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert, TLSAuthClients: "maybe"}, "yes, no or optional"},
		{"key for CA", server.Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.ServerKey}, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Bind, tc.cfg.TLSPort = "127.0.0.1", 1
			if _, err := server.Start(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start = %v, want an error about %s", err, tc.want)
			}
		})
	}
	// Without a CA, clients are not asked for certificates: enough.
	n := servertest.Start(t, server.Config{TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSAuthClients: "no"})
	if err := client(t, n.TLSAddr(), certs.Anonymous()).Ping(context.Background()).Err(); err != nil {
		t.Errorf("PING without a CA, tls-auth-clients no: %v", err)
	}
}

// TestTLS_ConfigSet: CONFIG SET of the TLS files reads them again, all
// the pairs of one command together: new connections get the new
// certificates, open ones keep theirs, and files that do not load change
// nothing. tls-port and tls-replication are fixed at start.
func TestTLS_ConfigSet(t *testing.T) {
	certs := testcert.Make(t)
	n := tlsNode(t, certs, "")
	ctx := context.Background()
	open := client(t, n.TLSAddr(), certs.Client())
	if err := open.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	otherCert, err := tls.LoadX509KeyPair(certs.OtherCert, certs.OtherKey)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := x509.NewCertPool()
	pem, err := os.ReadFile(certs.OtherCACert)
	if err != nil || !otherCA.AppendCertsFromPEM(pem) {
		t.Fatal("read the other CA", err)
	}
	otherClient := &tls.Config{RootCAs: otherCA, Certificates: []tls.Certificate{otherCert}}
	ping := func(tc *tls.Config) error { return client(t, n.TLSAddr(), tc).Ping(ctx).Err() }

	// A certificate with another's key: refused, nothing changes.
	err = open.ConfigSet(ctx, "tls-key-file", certs.ClientKey).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR CONFIG SET failed (possibly related to argument 'tls-key-file') - Unable to update TLS configuration: ") {
		t.Errorf("CONFIG SET tls-key-file of another certificate: %v, want Redis' refusal", err)
	}
	// One pair of a new certificate without its key: refused too, as the
	// certificate and the old key do not match.
	if err := open.ConfigSet(ctx, "tls-cert-file", certs.OtherServerCert).Err(); err == nil {
		t.Error("CONFIG SET tls-cert-file alone, of a certificate with another key: accepted")
	}
	if got, _ := open.ConfigGet(ctx, "tls-*-file").Result(); got["tls-cert-file"] != certs.ServerCert || got["tls-key-file"] != certs.ServerKey {
		t.Errorf("after the refused CONFIG SETs: %v, want the files of the start", got)
	}
	if err := ping(certs.Client()); err != nil {
		t.Fatalf("new connection after the refused CONFIG SETs: %v", err)
	}

	// The other CA's files, in one command.
	if err := open.Do(ctx, "CONFIG", "SET", "tls-cert-file", certs.OtherServerCert, "tls-key-file", certs.OtherServerKey,
		"tls-ca-cert-file", certs.OtherCACert).Err(); err != nil {
		t.Fatalf("CONFIG SET the other CA's files: %v", err)
	}
	if err := open.Ping(ctx).Err(); err != nil {
		t.Errorf("the connection opened before: %v, want it kept", err)
	}
	if err := ping(certs.Client()); err == nil {
		t.Error("a new client of the old CA connected: the old certificate is still served")
	}
	if err := ping(otherClient); err != nil {
		t.Errorf("a new client of the new CA: %v", err)
	}
	// tls-auth-clients applies to the next handshake too.
	anon := &tls.Config{RootCAs: otherCA}
	if err := ping(anon); err == nil {
		t.Error("a client without a certificate connected with tls-auth-clients yes")
	}
	if err := open.ConfigSet(ctx, "tls-auth-clients", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := ping(anon); err != nil {
		t.Errorf("a client without a certificate after CONFIG SET tls-auth-clients no: %v", err)
	}
	if err := open.ConfigSet(ctx, "tls-auth-clients", "maybe").Err(); err == nil || !strings.Contains(err.Error(), "one of the following: no, yes, optional") {
		t.Errorf("CONFIG SET tls-auth-clients maybe: %v", err)
	}
	for _, name := range []string{"tls-port", "tls-replication"} {
		if err := open.ConfigSet(ctx, name, "1").Err(); err == nil || !strings.Contains(err.Error(), "can't set immutable config") {
			t.Errorf("CONFIG SET %s: %v, want immutable", name, err)
		}
	}
}

// TestTLS_ConfigSetWithoutTLS: a node without TLS keeps the files CONFIG
// SET gives without reading them, as Redis does.
func TestTLS_ConfigSetWithoutTLS(t *testing.T) {
	n := servertest.Start(t, server.Config{})
	c := client(t, n.Addr(), nil)
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "tls-cert-file", "/nonexistent.crt").Err(); err != nil {
		t.Fatalf("CONFIG SET tls-cert-file without TLS: %v", err)
	}
	if got, err := c.ConfigGet(ctx, "tls-cert-file").Result(); err != nil || got["tls-cert-file"] != "/nonexistent.crt" {
		t.Errorf("CONFIG GET tls-cert-file = %v, %v", got, err)
	}
}
