package server

import (
	"cmp"
	"errors"
	"strconv"
	"sync"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/tlsconf"
)

// TLS client authentication, redis.conf's tls-auth-clients values.
const (
	TLSAuthYes      = tlsconf.AuthYes      // a client certificate signed by the CA is required
	TLSAuthNo       = tlsconf.AuthNo       // none is asked for
	TLSAuthOptional = tlsconf.AuthOptional // one is asked for and, when given, must verify
)

// tlsFiles are cfg's tls-* settings.
func tlsFiles(cfg *Config) tlsconf.Files {
	return tlsconf.Files{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, CAFile: cfg.TLSCACertFile,
		AuthClients: cmp.Or(cfg.TLSAuthClients, TLSAuthYes), Replication: cfg.TLSReplication}
}

// loadTLS reads the certificates when the node uses TLS (a tls-port, or
// tls-replication), checking them as Redis 7.0 does at start; nil when it
// does not.
func loadTLS(cfg *Config) (*tlsconf.Certs, error) {
	if cfg.TLSPort == 0 && !cfg.TLSReplication {
		return nil, nil
	}
	if cfg.TLSPort != 0 && (cfg.TLSCertFile == "" || cfg.TLSKeyFile == "") {
		return nil, errors.New("tls-port needs tls-cert-file and tls-key-file")
	}
	if cfg.TLSReplication && (cfg.TLSCertFile == "" || cfg.TLSKeyFile == "") {
		return nil, errors.New("tls-replication yes needs tls-cert-file and tls-key-file: each member shows its certificate to the others")
	}
	return tlsconf.Load(tlsFiles(cfg))
}

// tlsSettings are the CONFIG parameters of TLS. The files and
// tls-auth-clients can be changed at run time, as in Redis: CONFIG SET
// stages the values and, once all the pairs of the command are set, reads
// the files again (only when the node uses TLS; otherwise the values are
// only kept). New connections, from clients and from other members, then
// get the new certificates; open ones keep theirs. Files that do not load
// change nothing. tls-port and tls-replication are fixed at start: they
// decide which listeners and which Raft transport the node has.
func tlsSettings(cfg *Config, certs *tlsconf.Certs, tlsPort int) []commands.Setting {
	var mu sync.Mutex // guards staged
	staged := tlsFiles(cfg)
	str := func(name string, p *string, check func(string) error) commands.Setting {
		return commands.Setting{Name: name, Group: "tls",
			Get: func() string {
				mu.Lock()
				defer mu.Unlock()
				return *p
			},
			Set: func(v string) error {
				if check != nil {
					if err := check(v); err != nil {
						return err
					}
				}
				mu.Lock()
				*p = v
				mu.Unlock()
				return nil
			},
			Apply: func() error {
				if certs == nil {
					return nil
				}
				mu.Lock()
				f := staged
				mu.Unlock()
				if err := certs.Reload(f); err != nil {
					return errors.New("Unable to update TLS configuration: " + err.Error())
				}
				return nil
			}}
	}
	auth := func(v string) error {
		switch v {
		case TLSAuthYes, TLSAuthNo, TLSAuthOptional:
			return nil
		}
		return errors.New("argument(s) must be one of the following: no, yes, optional")
	}
	fixed := func(name, v string) commands.Setting {
		return commands.Setting{Name: name, Get: func() string { return v }}
	}
	return []commands.Setting{
		str("tls-cert-file", &staged.CertFile, nil),
		str("tls-key-file", &staged.KeyFile, nil),
		str("tls-ca-cert-file", &staged.CAFile, nil),
		str("tls-auth-clients", &staged.AuthClients, auth),
		fixed("tls-port", strconv.Itoa(tlsPort)),
		fixed("tls-replication", yesNo(cfg.TLSReplication)),
	}
}
