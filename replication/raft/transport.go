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

// contactTransport is a Raft transport that notes in seen each member
// address that answers this node's AppendEntries (the leader's heartbeats
// included), RequestVote or RequestPreVote: contact that spares the probe
// a dial (probeEvery). Raft's network and in-memory transports both have
// pre-vote and Close, which raft looks for; a transport without them is
// not wrapped (so raft does not believe it has them).
type contactTransport struct {
	fullTransport
	seen *reachability
}

// fullTransport is a transport with the optional parts raft checks for.
type fullTransport interface {
	hraft.Transport
	hraft.WithPreVote
	hraft.WithClose
}

// withContact wraps t when it is a fullTransport.
func withContact(t hraft.Transport, seen *reachability) hraft.Transport {
	if f, ok := t.(fullTransport); ok {
		return contactTransport{f, seen}
	}
	return t
}

func (t contactTransport) answered(target hraft.ServerAddress, err error) error {
	if err == nil {
		t.seen.note(string(target))
	}
	return err
}

func (t contactTransport) AppendEntries(id hraft.ServerID, target hraft.ServerAddress, args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) error {
	return t.answered(target, t.fullTransport.AppendEntries(id, target, args, resp))
}

func (t contactTransport) RequestVote(id hraft.ServerID, target hraft.ServerAddress, args *hraft.RequestVoteRequest, resp *hraft.RequestVoteResponse) error {
	return t.answered(target, t.fullTransport.RequestVote(id, target, args, resp))
}

func (t contactTransport) RequestPreVote(id hraft.ServerID, target hraft.ServerAddress, args *hraft.RequestPreVoteRequest, resp *hraft.RequestPreVoteResponse) error {
	return t.answered(target, t.fullTransport.RequestPreVote(id, target, args, resp))
}
