// Package tlsconf builds a node's TLS settings from its tls-* files: the
// client port's (tls-port, tls-auth-clients) and the mutual TLS between
// members (tls-replication), which every member-to-member transport shares:
// the Raft transport, the link that forwards commands to the leader, and
// any other replication transport.
//
// The files can be read again while the node runs (CONFIG SET
// tls-cert-file ...): every *tls.Config this package returns looks up the
// newest certificates at each handshake, so new connections use them and
// open ones keep theirs, as in Redis.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// TLS client authentication, redis.conf's tls-auth-clients values.
const (
	AuthYes      = "yes"      // a client certificate signed by the CA is required
	AuthNo       = "no"       // none is asked for
	AuthOptional = "optional" // one is asked for and, when given, must verify
)

// Files are the tls-* settings.
type Files struct {
	CertFile, KeyFile string // tls-cert-file, tls-key-file: the node's certificate and key (PEM)
	CAFile            string // tls-ca-cert-file: the CA that signs client and member certificates
	AuthClients       string // tls-auth-clients: AuthYes ("" too), AuthNo or AuthOptional
	// Replication is tls-replication yes: members talk to each other over
	// mutual TLS, each showing its certificate, which the CA must have
	// signed. It needs CAFile.
	Replication bool
}

// Certs holds a node's loaded certificates. Safe for concurrent use.
type Certs struct {
	cur atomic.Pointer[state]
}

// state is one loading of the files, never changed once stored.
type state struct {
	files   Files
	cert    tls.Certificate
	pool    *x509.CertPool // the CA; nil without CAFile
	clients *tls.Config    // the client port's
	members *tls.Config    // what a member's listener takes from other members
}

// Load reads the files, checking them as Redis 7.0 does at start: a
// certificate and its key are required, and the CA unless tls-auth-clients
// is no and tls-replication is off.
func Load(f Files) (*Certs, error) {
	s, err := load(f)
	if err != nil {
		return nil, err
	}
	c := &Certs{}
	c.cur.Store(s)
	return c, nil
}

// Reload reads f and, when it loads, makes it the certificates of every
// handshake from now on; otherwise nothing changes.
func (c *Certs) Reload(f Files) error {
	s, err := load(f)
	if err != nil {
		return err
	}
	c.cur.Store(s)
	return nil
}

// Files returns the settings the certificates in use were read from.
func (c *Certs) Files() Files { return c.cur.Load().files }

func load(f Files) (*state, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("TLS needs tls-cert-file and tls-key-file")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls-cert-file, tls-key-file: %w", err)
	}
	s := &state{files: f, cert: cert}
	s.clients = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.AuthClients == "" {
		s.files.AuthClients = AuthYes
	}
	switch s.files.AuthClients {
	case AuthNo:
		s.clients.ClientAuth = tls.NoClientCert
	case AuthYes:
		s.clients.ClientAuth = tls.RequireAndVerifyClientCert
	case AuthOptional:
		s.clients.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		return nil, fmt.Errorf("tls-auth-clients: want yes, no or optional, got %q", f.AuthClients)
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls-ca-cert-file: %w", err)
		}
		s.pool = x509.NewCertPool()
		if !s.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca-cert-file %s: no PEM certificate in it", f.CAFile)
		}
		s.clients.ClientCAs = s.pool
	} else if f.Replication {
		return nil, errors.New("tls-replication yes needs tls-ca-cert-file, the CA that signs every member's certificate")
	} else if s.files.AuthClients != AuthNo {
		return nil, fmt.Errorf("tls-auth-clients %s needs tls-ca-cert-file, the CA that signs client certificates", s.files.AuthClients)
	}
	s.members = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: s.pool}
	if f.Replication {
		// A member shows this certificate to the others as a client
		// too: it must allow both uses.
		if err := checkUsage(cert, s.pool); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkUsage makes sure a member's own certificate would pass the checks the
// other members make: signed by the CA, for both server and client use.
func checkUsage(cert tls.Certificate, pool *x509.CertPool) error {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("tls-cert-file: %w", err)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
			return fmt.Errorf("tls-replication yes: tls-cert-file does not verify against tls-ca-cert-file for %s use, which members need: %w", usageName(use), err)
		}
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client (clientAuth)"
	}
	return "server (serverAuth)"
}

// ClientPort returns the settings of the client port (tls-port): the
// node's certificate, and client certificates asked for as tls-auth-clients
// says.
func (c *Certs) ClientPort() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return c.cur.Load().clients, nil
	}}
}

// MemberServer returns the settings a member's listener for other members
// takes: it shows the node's certificate and requires one the CA signed,
// whatever tls-auth-clients says.
func (c *Certs) MemberServer() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return c.cur.Load().members, nil
	}}
}

// MemberClient returns the settings a member dials another with: it shows
// the node's certificate and accepts the other's only when the CA signed it
// for server use. Host names are not checked, as Redis does not check them
// on its replication links: members are often addressed by IP, and the
// CA, which should sign only the cluster's members, is what admits them.
func (c *Certs) MemberClient() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			s := c.cur.Load()
			return &s.cert, nil
		},
		// The chain is verified in VerifyConnection, against the CA of
		// the moment, without the host name check.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs, c.cur.Load().pool, x509.ExtKeyUsageServerAuth)
		},
	}
}

func verifyPeer(cs tls.ConnectionState, pool *x509.CertPool, use x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tlsconf: the member showed no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}})
	return err
}

// Dial connects to addr over TCP and completes the TLS handshake with cfg
// (MemberClient's) within timeout, so that a peer that does not take the
// certificate fails here, not at the first read.
func Dial(addr string, timeout time.Duration, cfg *tls.Config) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*tls.Conn), nil
}

// Listen listens on addr (TCP) and wraps each connection it accepts in TLS
// with cfg (MemberServer's). The handshake happens at the connection's
// first read or write, in the goroutine that serves it, so one slow or
// refused peer does not hold up Accept.
func Listen(addr string, cfg *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, cfg), nil
}
