package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS client authentication, redis.conf's tls-auth-clients values.
const (
	TLSAuthYes      = "yes"      // a client certificate signed by the CA is required
	TLSAuthNo       = "no"       // none is asked for
	TLSAuthOptional = "optional" // one is asked for and, when given, must verify
)

// tlsConfig builds the TLS listener's settings from the tls-* files, as
// Redis 7.0 checks them at start: a certificate and its key are required,
// and the CA that signs client certificates unless tls-auth-clients is no.
// Clients speak TLS 1.2 or 1.3, Redis' default tls-protocols.
func tlsConfig(cfg *Config) (*tls.Config, error) {
	if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
		return nil, errors.New("tls-port needs tls-cert-file and tls-key-file")
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls-cert-file, tls-key-file: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	auth := cfg.TLSAuthClients
	if auth == "" {
		auth = TLSAuthYes
	}
	switch auth {
	case TLSAuthNo:
		tc.ClientAuth = tls.NoClientCert
	case TLSAuthYes:
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	case TLSAuthOptional:
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		return nil, fmt.Errorf("tls-auth-clients: want yes, no or optional, got %q", auth)
	}
	if cfg.TLSCACertFile != "" {
		pem, err := os.ReadFile(cfg.TLSCACertFile)
		if err != nil {
			return nil, fmt.Errorf("tls-ca-cert-file: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		if !tc.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca-cert-file %s: no PEM certificate in it", cfg.TLSCACertFile)
		}
	} else if auth != TLSAuthNo {
		return nil, fmt.Errorf("tls-auth-clients %s needs tls-ca-cert-file, the CA that signs client certificates", auth)
	}
	return tc, nil
}
