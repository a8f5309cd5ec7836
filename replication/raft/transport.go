package raft

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/internal/tlsconf"
)

// NewTLSTransport is raft's network transport over mutual TLS
// (tls-replication): it listens on bindAddr with server (the certificate
// to show, and the CA other members' certificates must verify against;
// tlsconf.Certs.MemberServer) and dials other members with client
// (tlsconf.Certs.MemberClient). advertise is the address the others reach
// this member at. A peer that shows no certificate, or one the CA did not
// sign, gets no further than the handshake: its connection is closed before
// a single Raft message is read from it or sent to it.
func NewTLSTransport(bindAddr string, advertise net.Addr, server, client *tls.Config, cfg *hraft.NetworkTransportConfig) (*hraft.NetworkTransport, error) {
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		// As raft's TCP transport: the others could not reach it.
		return nil, fmt.Errorf("raft: cluster address %v is not one other members can reach", advertise)
	}
	ln, err := tlsconf.Listen(bindAddr, server)
	if err != nil {
		return nil, err
	}
	cfg.Stream = &tlsStream{Listener: ln, advertise: advertise, client: client}
	return hraft.NewNetworkTransportWithConfig(cfg), nil
}

// tlsStream is a hraft.StreamLayer over TLS.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	client    *tls.Config
}

var _ hraft.StreamLayer = (*tlsStream)(nil)

// Addr is the address the other members reach this one at (raft's
// LocalAddr).
func (s *tlsStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}

// Dial connects to another member and completes the handshake within
// timeout.
func (s *tlsStream) Dial(addr hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tlsconf.Dial(string(addr), timeout, s.client)
}
