package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testcert"
	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft"
	"github.com/throttleddb/throttled/server"
)

// tlsMember is one member of a Raft group under tls-replication: no plain
// port, a TLS port, Raft traffic over TLS on a real loopback socket.
type tlsMember struct {
	id     string
	node   *server.Node
	client *redis.Client
}

// memberFiles are a member's certificate, key and CA.
type memberFiles struct{ cert, key, ca string }

// tlsCluster starts one member per entry of files, all given the same
// peers, so that they bootstrap one cluster.
func tlsCluster(t *testing.T, certs testcert.Files, files []memberFiles) []*tlsMember {
	t.Helper()
	peers := map[string]string{}
	for i := range files {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		peers[fmt.Sprintf("n%d", i+1)] = proc.Addr(port)
	}
	var members []*tlsMember
	for i, f := range files {
		id := fmt.Sprintf("n%d", i+1)
		members = append(members, startTLSMember(t, certs, id, peers[id], peers, "", f))
	}
	return members
}

// startTLSMember starts one member: with peers it bootstraps, with join it
// asks that RESP address to add it.
func startTLSMember(t *testing.T, certs testcert.Files, id, clusterAddr string, peers map[string]string, join string, f memberFiles) *tlsMember {
	t.Helper()
	tlsPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	n, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, TLSPort: tlsPort,
		TLSCertFile: f.cert, TLSKeyFile: f.key, TLSCACertFile: f.ca, TLSReplication: true,
		Dir: t.TempDir(), Logger: testlog.Slog(t, slog.LevelWarn).With("member", id),
		Raft: &server.RaftConfig{NodeID: id, ClusterAddr: clusterAddr, Peers: peers, Join: join, ApplyTimeout: 2 * time.Second,
			Tuning: raft.Tuning{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond,
				LeaderLease: 100 * time.Millisecond, TrailingLogs: 16}}})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	// A client of the cluster's CA.
	c := redis.NewClient(&redis.Options{Addr: n.TLSAddr(), TLSConfig: certs.Client(), Protocol: 2,
		MaxRetries: -1, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	return &tlsMember{id: id, node: n, client: c}
}

// membersOf returns RAFT MEMBERS of m by id: [cluster-addr, resp-addr,
// role, reachable].
func membersOf(t *testing.T, m *tlsMember) map[string][]any {
	t.Helper()
	rows, err := m.client.Do(context.Background(), "RAFT", "MEMBERS").Slice()
	if err != nil {
		t.Fatalf("RAFT MEMBERS on %s: %v", m.id, err)
	}
	out := map[string][]any{}
	for _, row := range rows {
		r := row.([]any)
		out[r[0].(string)] = r[1:]
	}
	return out
}

// settle runs op until it answers anything but CLUSTERDOWN or UNKNOWN,
// which a busy machine can cause for a moment by costing the cluster its
// leader; op must be safe to send again (SET, GET). Another error fails t.
func settle(t *testing.T, what string, op func() error) {
	t.Helper()
	var err error
	testwait.For(t, 20*time.Second, what, func() bool {
		err = op()
		return err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") && !strings.HasPrefix(err.Error(), "UNKNOWN")
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// leaderOf waits until every member of ms names the same leader, at its TLS
// address, and returns it.
func leaderOf(t *testing.T, ms []*tlsMember) *tlsMember {
	t.Helper()
	var lead *tlsMember
	testwait.For(t, 20*time.Second, "a leader every member names", func() bool {
		lead = nil
		for _, m := range ms {
			pair, err := m.client.Do(context.Background(), "RAFT", "LEADER").Slice()
			if err != nil || len(pair) != 2 {
				return false
			}
			for _, o := range ms {
				if o.id == pair[0] && pair[1] == o.node.TLSAddr() && (lead == nil || lead == o) {
					lead = o
				}
			}
			if lead == nil || lead.id != pair[0] {
				return false
			}
		}
		return true
	})
	return lead
}

func memberFilesOf(f testcert.Files) memberFiles {
	return memberFiles{f.ServerCert, f.ServerKey, f.CACert}
}

// TestRaftTLS_Cluster: three members with tls-replication yes and no plain
// port elect a leader over TLS, announce their TLS addresses, and a command
// sent to a follower is forwarded to the leader over TLS and applied on
// every member.
func TestRaftTLS_Cluster(t *testing.T) {
	certs := testcert.Make(t)
	mf := memberFilesOf(certs)
	ms := tlsCluster(t, certs, []memberFiles{mf, mf, mf})
	lead := leaderOf(t, ms)
	ctx := context.Background()
	var follower *tlsMember
	for _, m := range ms {
		if m != lead {
			follower = m
		}
	}
	// SET, which may be sent again: a busy machine can cost the cluster
	// its leader for a moment (CLUSTERDOWN, UNKNOWN).
	settle(t, "SET through a follower", func() error { return follower.client.Set(ctx, "s", "through a follower", 0).Err() })
	// Reads go through the log: every member answers what was written.
	for _, m := range ms {
		var v string
		settle(t, "GET on "+m.id, func() (err error) { v, err = m.client.Get(ctx, "s").Result(); return err })
		if v != "through a follower" {
			t.Errorf("GET on %s = %q", m.id, v)
		}
	}
	// Each member announces its RESP address through the log once it
	// knows the leader: wait for the three, and for the probes.
	var members map[string][]any
	defer func() {
		if t.Failed() {
			t.Logf("RAFT MEMBERS on the leader: %v", members)
		}
	}()
	testwait.For(t, 10*time.Second, "RAFT MEMBERS giving every member's TLS address, reachable", func() bool {
		members = membersOf(t, lead)
		for _, m := range ms {
			if r := members[m.id]; r == nil || r[1] != m.node.TLSAddr() || r[3] != int64(1) {
				return false
			}
		}
		return true
	})
	if cfg, err := lead.client.ConfigGet(ctx, "tls-replication").Result(); err != nil || cfg["tls-replication"] != "yes" {
		t.Errorf("CONFIG GET tls-replication = %v, %v", cfg, err)
	}
}

// TestRaftTLS_Intruder: a member whose certificate another CA signed (and
// which trusts that CA only) is listed in the peers, but the other two
// neither take its Raft traffic nor let it take theirs: they elect a leader
// and serve between themselves, and it never learns of the leader nor
// applies an entry. A plain TCP transport would have let it in.
func TestRaftTLS_Intruder(t *testing.T) {
	certs := testcert.Make(t)
	mf := memberFilesOf(certs)
	ms := tlsCluster(t, certs, []memberFiles{mf, mf, {certs.OtherServerCert, certs.OtherServerKey, certs.OtherCACert}})
	good, intruder := ms[:2], ms[2]
	lead := leaderOf(t, good)
	ctx := context.Background()
	for _, m := range good {
		settle(t, "SET on "+m.id, func() error { return m.client.Set(ctx, "from-"+m.id, "ok", 0).Err() })
	}
	// The intruder's clients show a certificate of its CA.
	otherCert, err := tls.LoadX509KeyPair(certs.OtherCert, certs.OtherKey)
	if err != nil {
		t.Fatal(err)
	}
	other := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{otherCert}}
	ic := redis.NewClient(&redis.Options{Addr: intruder.node.TLSAddr(), TLSConfig: other, Protocol: 2, MaxRetries: -1})
	defer ic.Close()
	// The intruder holds a command until it knows a leader, then answers
	// CLUSTERDOWN at its apply timeout (2 s): by then the leader has sent
	// it heartbeats for seconds, every one refused at the handshake.
	err = ic.Set(ctx, "n", "intruder", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Errorf("SET on the intruder: %v, want CLUSTERDOWN", err)
	}
	if pair, err := ic.Do(ctx, "RAFT", "LEADER").Result(); err != redis.Nil {
		t.Errorf("RAFT LEADER on the intruder = %v, %v; want none", pair, err)
	}
	info, err := ic.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "raft_commit_index:0\r\n") || !strings.Contains(info, "raft_applied_index:0\r\n") {
		t.Errorf("the intruder's INFO replication shows entries it should never have got:\n%s", info)
	}
	for _, k := range []string{"from-n1", "from-n2", "n"} {
		var v string
		settle(t, "GET "+k, func() (err error) {
			if v, err = lead.client.Get(ctx, k).Result(); err == redis.Nil {
				v, err = "(none)", nil
			}
			return err
		})
		if want := map[string]string{"n": "(none)"}[k]; want != "" && v != want || want == "" && v != "ok" {
			t.Errorf("GET %s on the cluster = %q (the intruder's SET must never apply)", k, v)
		}
	}
	// The leader reaches the other good member, never the intruder: its
	// probe must pass the handshake.
	if r := membersOf(t, lead)[intruder.id]; r == nil || r[3] != int64(0) {
		t.Errorf("RAFT MEMBERS on the leader shows the intruder as %v, want unreachable", r)
	}

	// Joining: a node of the other CA asks first, then one of ours. Ours
	// becomes a member; the other, which asked before, never does (its
	// RAFT JOIN dies at the handshake with the leader's TLS port).
	join := func(id string, f memberFiles) *tlsMember {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		return startTLSMember(t, certs, id, proc.Addr(port), nil, lead.node.TLSAddr(), f)
	}
	join("n4", memberFiles{certs.OtherServerCert, certs.OtherServerKey, certs.OtherCACert})
	join("n5", memberFilesOf(certs))
	testwait.For(t, 20*time.Second, "n5 joined", func() bool { return membersOf(t, lead)["n5"] != nil })
	if r := membersOf(t, lead)["n4"]; r != nil {
		t.Errorf("the other CA's node joined: %v", r)
	}
}

// TestRaftTLS_Config: tls-replication without what it needs stops the
// start with one line, before anything is opened.
func TestRaftTLS_Config(t *testing.T) {
	certs := testcert.Make(t)
	rc := func() *server.RaftConfig {
		return &server.RaftConfig{NodeID: "n1", ClusterAddr: "127.0.0.1:1", Peers: map[string]string{"n1": "127.0.0.1:1"}}
	}
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no CA", server.Config{TLSPort: 1, TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSAuthClients: "no", TLSReplication: true},
			"tls-replication yes needs tls-ca-cert-file"},
		{"no certificate", server.Config{Port: 1, TLSReplication: true}, "tls-replication yes needs tls-cert-file and tls-key-file"},
		{"no tls-port", server.Config{Port: 1, TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert, TLSReplication: true, Raft: rc()},
			"--tls-replication yes needs --tls-port"},
		{"TLS only, no tls-replication", server.Config{TLSPort: 1, TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert, Raft: rc()},
			"needs the plain --port, or --tls-replication yes"},
		{"client-only certificate", server.Config{TLSPort: 1, TLSCertFile: certs.ClientCert, TLSKeyFile: certs.ClientKey, TLSCACertFile: certs.CACert, TLSReplication: true},
			"server (serverAuth) use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Bind, tc.cfg.Dir = "127.0.0.1", t.TempDir()
			_, err := server.Start(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Start = %v, want one line about %q", err, tc.want)
			}
		})
	}
}

// startTLSMesh starts a CRDT mesh node under tls-replication, with no
// plain port.
// A port another process took since it was found free fails the start
// with EADDRINUSE, which the caller may retry with other ports.
func startTLSMesh(t *testing.T, certs testcert.Files, id, clusterAddr string, peers map[string]string, f memberFiles) (*tlsMember, error) {
	t.Helper()
	tlsPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	n, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, TLSPort: tlsPort,
		TLSCertFile: f.cert, TLSKeyFile: f.key, TLSCACertFile: f.ca, TLSReplication: true,
		Logger: testlog.Slog(t, slog.LevelWarn).With("node", id),
		CRDT:   &server.CRDTConfig{NodeID: id, ClusterAddr: clusterAddr, Peers: peers}})
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, err
	}
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	c := redis.NewClient(&redis.Options{Addr: n.TLSAddr(), TLSConfig: certs.Client(), Protocol: 2,
		MaxRetries: -1, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	return &tlsMember{id: id, node: n, client: c}, nil
}

// TestMeshTLS: tls-replication covers the CRDT mesh too. Two nodes of one
// CA see each other's decisions; a third node, of another CA, that lists
// them as peers sends them nothing they take.
func TestMeshTLS(t *testing.T) {
	certs := testcert.Make(t)
	var a, b, x *tlsMember
	// The cluster ports are chosen before any node starts (each lists the
	// others); one taken meanwhile by another process means new ports for
	// all three.
	for try := 0; ; try++ {
		peers := map[string]string{}
		for _, id := range []string{"a", "b", "x"} {
			port, err := proc.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			peers[id] = proc.Addr(port)
		}
		var errA, errB, errX error
		a, errA = startTLSMesh(t, certs, "a", peers["a"], peers, memberFilesOf(certs))
		if errA == nil {
			b, errB = startTLSMesh(t, certs, "b", peers["b"], peers, memberFilesOf(certs))
		}
		if errA == nil && errB == nil {
			x, errX = startTLSMesh(t, certs, "x", peers["x"], peers, memberFiles{certs.OtherServerCert, certs.OtherServerKey, certs.OtherCACert})
		}
		if err := errors.Join(errA, errB, errX); err == nil {
			break
		} else if try == 5 {
			t.Fatal(err)
		}
		for _, m := range []*tlsMember{a, b} {
			if m != nil {
				m.node.Close()
			}
		}
		a, b = nil, nil
	}
	ctx := context.Background()
	otherCert, err := tls.LoadX509KeyPair(certs.OtherCert, certs.OtherKey)
	if err != nil {
		t.Fatal(err)
	}
	xc := redis.NewClient(&redis.Options{Addr: x.node.TLSAddr(), Protocol: 2, MaxRetries: -1,
		TLSConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{otherCert}}})
	defer xc.Close()
	// The intruder decides first, on a key of its own and on the shared one.
	for _, k := range []string{"intruder", "shared"} {
		if got, err := xc.Do(ctx, "CL.THROTTLE", k, 0, 1, 3600).Slice(); err != nil || got[0] != int64(0) {
			t.Fatalf("CL.THROTTLE %s on the intruder = %v, %v", k, got, err)
		}
	}
	if got, err := a.client.Do(ctx, "CL.THROTTLE", "k", 0, 1, 3600).Slice(); err != nil || got[0] != int64(0) {
		t.Fatalf("CL.THROTTLE on a = %v, %v", got, err)
	}
	peek := func(m *tlsMember, k string) int64 {
		got, err := m.client.Do(ctx, "CL.THROTTLE", k, 0, 1, 3600, 0).Slice()
		if err != nil {
			t.Fatalf("peek %s on %s: %v", k, m.id, err)
		}
		return got[2].(int64)
	}
	testwait.For(t, 10*time.Second, "a's decision on b", func() bool { return peek(b, "k") == 0 })
	// b has a's decision, shipped after the intruder's; the intruder's
	// never came.
	for _, m := range []*tlsMember{a, b} {
		for _, k := range []string{"intruder", "shared"} {
			if r := peek(m, k); r != 1 {
				t.Errorf("%s on %s: remaining %d, want 1 (the intruder's decision must not arrive)", k, m.id, r)
			}
		}
	}
}
