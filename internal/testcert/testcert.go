// Package testcert makes a throwaway certificate authority, and server and
// client certificates signed by it, for the TLS tests: PEM files in a
// folder of the test's, and the client's tls.Config.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files Make writes.
type Files struct {
	CACert string // the CA's certificate: tls-ca-cert-file, and the clients' root
	// ServerCert and ServerKey are tls-cert-file and tls-key-file: for
	// 127.0.0.1, ::1 and localhost, and for client use too, so that Raft
	// members can show it to each other (tls-replication).
	ServerCert, ServerKey string
	ClientCert, ClientKey string // a client certificate the CA signed
	OtherCert, OtherKey   string // a client certificate another CA signed
	// OtherCACert is the other CA's certificate, and OtherServerCert and
	// OtherServerKey a certificate it signed as ServerCert is signed: a
	// member of some other cluster.
	OtherCACert, OtherServerCert, OtherServerKey string
	ca                                           *x509.CertPool
	client                                       tls.Certificate
}

// Make writes a new CA and its certificates into a temporary folder of t.
func Make(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	f := Files{CACert: filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
		OtherCert: filepath.Join(dir, "other.crt"), OtherKey: filepath.Join(dir, "other.key"),
		OtherCACert: filepath.Join(dir, "other-ca.crt"), OtherServerCert: filepath.Join(dir, "other-server.crt"),
		OtherServerKey: filepath.Join(dir, "other-server.key")}
	ca, caKey := newCA(t, "throttled test CA")
	write(t, f.CACert, "CERTIFICATE", ca.Raw)
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "throttled test server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}
	issue(t, ca, caKey, server, f.ServerCert, f.ServerKey)
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "throttled test client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	issue(t, ca, caKey, client, f.ClientCert, f.ClientKey)
	other, otherKey := newCA(t, "some other CA")
	issue(t, other, otherKey, client, f.OtherCert, f.OtherKey)
	write(t, f.OtherCACert, "CERTIFICATE", other.Raw)
	issue(t, other, otherKey, server, f.OtherServerCert, f.OtherServerKey)
	f.ca = x509.NewCertPool()
	f.ca.AddCert(ca)
	var err error
	if f.client, err = tls.LoadX509KeyPair(f.ClientCert, f.ClientKey); err != nil {
		t.Fatal(err)
	}
	return f
}

// Client returns a client's TLS settings: it trusts the CA and shows the
// client certificate.
func (f Files) Client() *tls.Config {
	return &tls.Config{RootCAs: f.ca, Certificates: []tls.Certificate{f.client}, MinVersion: tls.VersionTLS12}
}

// Anonymous returns a client's TLS settings without a client certificate.
func (f Files) Anonymous() *tls.Config {
	return &tls.Config{RootCAs: f.ca, MinVersion: tls.VersionTLS12}
}

func template(t testing.TB, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	return tmpl
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue signs tmpl with the CA and writes the certificate and a new key.
func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate, certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	tmpl = template(t, tmpl)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, certPath, "CERTIFICATE", der)
	write(t, keyPath, "PRIVATE KEY", pkcs8)
}

func write(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
