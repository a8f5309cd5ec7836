package raft

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/pace"
)

// Config configures a Node. ID, ClusterAddr, RESPAddr, Clock and the parts
// in Parts are required.
type Config struct {
	// ID is this member's id, unique in the cluster.
	ID string
	// ClusterAddr is the address Raft traffic reaches this member at (what
	// it advertises).
	ClusterAddr string
	// RESPAddr is the address clients reach this member at: other members
	// forward commands to it when it leads, and RAFT LEADER names it.
	RESPAddr string
	// Peers is every member of a new cluster by id, this one included:
	// the members bootstrap the cluster with it the first time they start.
	// Empty with Join set, or on a restart (the stored configuration wins).
	Peers map[string]string
	// Join is the RESP address of a member of an existing cluster that
	// this node asks to be added to, when it has no Raft state yet.
	Join string
	// Seeded starts a new one-member group (Peers names only this member)
	// from the keyspace the commands server already holds, a restored
	// backup, instead of an empty one: see seed. Members added later with
	// Join receive that state as a snapshot.
	Seeded bool
	// Password is what this node AUTHs with when it forwards to another
	// (the members share their requirepass).
	Password string
	// TLS, when set, is how this node dials other members' RESP
	// addresses (forwarding, joining), which are then TLS ports, and
	// probes their cluster addresses (tls-replication;
	// tlsconf.Certs.MemberClient). nil: plain TCP.
	TLS *tls.Config
	// ApplyTimeout bounds a command's wait for the cluster (default 2s):
	// after it the client gets CLUSTERDOWN or UNKNOWN.
	ApplyTimeout time.Duration
	// Tuning is Raft's timeouts and log retention (see DefaultTuning).
	Tuning Tuning
	Clock  clock.Clock
	Logger *slog.Logger
}

// Tuning holds Raft's timeouts, and how many entries it keeps after a
// snapshot (a member further behind than that gets the snapshot).
type Tuning struct {
	Heartbeat, Election, LeaderLease time.Duration
	TrailingLogs                     uint64
}

// DefaultTuning is tuned for a LAN: a follower misses the leader after 500
// ms to 1.5 s without contact, and an election takes 500 ms to 1 s more, so a
// new leader serves within about 2 s of the old one dying (raft-notes.md,
// section 2, measured 1.4-2.4 s with twice these values; bench/raft measured
// a median of 1.08 s). A leader that loses its quorum steps down after the
// lease, 500 ms, the most raft allows beside this heartbeat: with 250 ms a
// loaded 2-core machine, whose leader missed its followers for 300-500 ms,
// saw the leader step down and elections follow (bench/raft, 19:18 run).
var DefaultTuning = Tuning{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, LeaderLease: 500 * time.Millisecond,
	TrailingLogs: 10240}

// Parts are the pieces of Raft a node runs on: the production ones (Pebble
// stores, file snapshots, TCP) or in-memory ones in tests.
type Parts struct {
	Logs   hraft.LogStore
	Stable hraft.StableStore
	Snaps  hraft.SnapshotStore
	Trans  hraft.Transport
}

// ErrConfig is returned by Start for unusable settings.
var ErrConfig = errors.New("raft: invalid configuration")

// ErrNoCluster is returned by Start for a member with no Raft state that
// is given neither peers to bootstrap with nor a member to join.
var ErrNoCluster = errors.New("raft: this member has no stored state and neither --peers (to start a new cluster) nor --join (to join one): give one of them")

// Node is one member of a Raft group serving a commands.Server. It
// implements commands.Cluster. Safe for concurrent use.
type Node struct {
	cfg   Config
	r     *hraft.Raft
	fsm   *fsm
	parts Parts
	log   *slog.Logger

	batch *batcher
	fwd   *forwarder

	// ready is set once this node leads and has applied every entry of
	// earlier terms (its barrier committed): it may stamp instants then.
	ready atomic.Bool
	// announcing is set while this node's RESP address is on its way to
	// the cluster.
	announcing atomic.Bool
	reach      reachability
	// failing are the followers this leader's heartbeats fail to reach,
	// with their last contact (ROLE, INFO replication's slaveN lines).
	failing sync.Map // id -> time.Time

	mu sync.Mutex // guards waiting
	// waiting are proposals that arrived when no leader was known.
	waiting []proposal
	// poke has watchLeader look at once: a proposal waits.
	poke chan struct{}

	obs     *hraft.Observer
	stop    chan struct{}
	stopped sync.WaitGroup
}

var _ commands.Cluster = (*Node)(nil)

// Start starts a member serving cmds, and makes cmds send its commands to it
// (commands.Server.SetCluster). It bootstraps the cluster from cfg.Peers if
// there is no Raft state yet, or asks cfg.Join to add it.
func Start(cfg Config, cmds *commands.Server, parts Parts) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		return nil, fmt.Errorf("%w: no clock", ErrConfig)
	}
	cfg.ApplyTimeout = cmp.Or(cfg.ApplyTimeout, 2*time.Second)
	if cfg.Tuning == (Tuning{}) {
		cfg.Tuning = DefaultTuning
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.Tuning.Heartbeat
	rc.ElectionTimeout = cfg.Tuning.Election
	rc.LeaderLeaseTimeout = cfg.Tuning.LeaderLease
	rc.TrailingLogs = cfg.Tuning.TrailingLogs
	// With nothing to replicate, the leader still sends each follower an
	// empty AppendEntries every [CommitTimeout, 2*CommitTimeout), only so
	// followers learn the commit index of the last entry. At 5 ms this was
	// most of an idle cluster's CPU (bench/idle: 4-6% of a core on the
	// leader); at 50 ms (hashicorp/raft's default) it was still a quarter
	// of an idle leader's CPU samples, as much as its heartbeats. It delays no
	// reply (the leader answers at commit, and a forwarded command's reply
	// comes from the leader), no election and no new leader's first commit
	// (heartbeats run on their own timer; a new entry is sent at once, and
	// bench/raft's failover logs show a new leader's first append 1-3 ms
	// after its election at 50 and at 250 ms alike). What it delays: an
	// idle follower's keyspace (its applied index, DEBUG DIGEST) catches
	// up with the last entry 0.5 to 1 s after it, not 50-100 ms; while
	// writes flow, each append carries the commit index as before.
	rc.CommitTimeout = 500 * time.Millisecond
	rc.Logger = NewHclog(cfg.Logger)
	n := &Node{cfg: cfg, fsm: newFSM(cmds), log: cfg.Logger, stop: make(chan struct{}), poke: make(chan struct{}, 1),
		reach: reachability{seen: map[string]time.Time{}}}
	parts.Trans = withContact(parts.Trans, &n.reach)
	n.parts = parts
	has, err := hraft.HasExistingState(parts.Logs, parts.Stable, parts.Snaps)
	if err != nil {
		return nil, err
	}
	switch {
	case !has && len(cfg.Peers) == 0 && cfg.Join == "":
		// It would wait forever for a cluster that nobody told it of.
		return nil, ErrNoCluster
	case has && cfg.Seeded:
		return nil, fmt.Errorf("%w: this member already holds Raft state: a backup can only start a new group", ErrConfig)
	case cfg.Seeded:
		addr := hraft.ServerAddress(cfg.Peers[cfg.ID])
		conf := hraft.Configuration{Servers: []hraft.Server{{ID: hraft.ServerID(cfg.ID), Address: addr}}}
		if err := seed(n.fsm, parts, conf); err != nil {
			return nil, fmt.Errorf("raft: seeding from the backup: %w", err)
		}
	case !has && len(cfg.Peers) > 0:
		var servers []hraft.Server
		for id, addr := range cfg.Peers {
			servers = append(servers, hraft.Server{ID: hraft.ServerID(id), Address: hraft.ServerAddress(addr)})
		}
		if err := hraft.BootstrapCluster(rc, parts.Logs, parts.Stable, parts.Snaps, parts.Trans,
			hraft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	// The server must send its commands here before Raft applies the
	// first entry (a restart replays the log at once).
	cmds.SetCluster(n)
	n.batch = newBatcher(n)
	n.fwd = newForwarder(cfg.Password, cfg.TLS, cfg.Logger)
	if has && cfg.Join != "" {
		if err := n.checkStillMember(); err != nil {
			n.fwd.close()
			return nil, err
		}
	}
	if n.r, err = hraft.NewRaft(rc, n.fsm, parts.Logs, parts.Stable, parts.Snaps, parts.Trans); err != nil {
		return nil, err
	}
	events := make(chan hraft.Observation, 16)
	n.obs = hraft.NewObserver(events, false, func(o *hraft.Observation) bool {
		switch o.Data.(type) {
		case hraft.LeaderObservation, hraft.RaftState, hraft.FailedHeartbeatObservation, hraft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	n.r.RegisterObserver(n.obs)
	n.stopped.Add(3)
	go n.watchLeader(events)
	go n.batch.run()
	go n.probe()
	if !has && cfg.Join != "" {
		n.stopped.Add(1)
		go n.join()
	}
	return n, nil
}

// Validate checks the settings that do not need anything started.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: --node-id is required", ErrConfig)
	case c.ClusterAddr == "":
		return fmt.Errorf("%w: --cluster-addr is required", ErrConfig)
	case c.Join != "" && len(c.Peers) > 0:
		return fmt.Errorf("%w: --join and --peers cannot be used together", ErrConfig)
	case len(c.Peers) > 0 && c.Peers[c.ID] == "":
		return fmt.Errorf("%w: --peers must list this node's own id %q", ErrConfig, c.ID)
	case len(c.Peers) > 0 && c.Peers[c.ID] != c.ClusterAddr:
		return fmt.Errorf("%w: --peers gives %s=%s but --cluster-addr is %s", ErrConfig, c.ID, c.Peers[c.ID], c.ClusterAddr)
	case c.Seeded && len(c.Peers) != 1:
		// Members bootstrapped empty beside it would hold the same first
		// entry's index and term as its seed, and never receive the seed.
		return fmt.Errorf("%w: a group restored from a backup starts with one member: give --peers with this node only, and add the others with --join", ErrConfig)
	}
	return nil
}

// Close leaves the cluster's traffic (it stays a member) and stops Raft.
// Commands still waiting get CLUSTERDOWN or UNKNOWN.
func (n *Node) Close() error {
	close(n.stop)
	n.r.DeregisterObserver(n.obs)
	err := n.r.Shutdown().Error()
	n.stopped.Wait()
	n.fwd.close()
	n.mu.Lock()
	waiting := n.waiting
	n.waiting = nil
	n.mu.Unlock()
	for _, p := range waiting {
		p.fail(replyDown)
	}
	if c, ok := n.parts.Trans.(hraft.WithClose); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}

// SetInstant implements commands.Cluster: the apply of DEBUG CLOCK SET or
// ADVANCE moves the cluster's time, on every replica, so that entries from
// the next on are applied, and stamped by whichever member leads, from it.
func (n *Node) SetInstant(now int64) {
	n.fsm.instant.Store(now)
	n.batch.setLast(now)
}

// AppliedInstant returns the instant of the last applied entry: the node's
// view of time for its keyspace (expiry, DEBUG DIGEST).
func (n *Node) AppliedInstant() int64 { return n.fsm.instant.Load() }

// Propose implements commands.Cluster: the leader batches cmd into the
// log, a follower forwards it to the leader, and a node that knows no
// leader holds it until one is known or its time is up.
func (n *Node) Propose(cmd *commands.Command, done func(reply []byte)) {
	n.route(proposal{cmd: cmd, done: done, deadline: time.Now().Add(n.cfg.ApplyTimeout)})
}

// proposal is a command on its way: done gets its reply.
type proposal struct {
	cmd      *commands.Command
	done     func([]byte)
	deadline time.Time
}

// route sends p on, or holds it until a leader is known: the first
// proposal held wakes watchLeader, which then retries every watchEvery.
func (n *Node) route(p proposal) {
	if n.send(p) {
		return
	}
	n.mu.Lock()
	first := len(n.waiting) == 0
	n.waiting = append(n.waiting, p)
	n.mu.Unlock()
	if first {
		select {
		case n.poke <- struct{}{}:
		default:
		}
	}
}

// send hands p to the batcher when this node leads, or forwards it to the
// leader; it reports false when no leader is known.
func (n *Node) send(p proposal) bool {
	if n.ready.Load() {
		n.batch.add(p)
		return true
	}
	if addr := n.leaderRESP(); addr != "" {
		n.fwd.forward(addr, p)
		return true
	}
	return false
}

// leaderRESP returns the leader's RESP address when another member leads
// and has announced it.
func (n *Node) leaderRESP() string {
	_, id := n.r.LeaderWithID()
	if id == "" || string(id) == n.cfg.ID {
		return ""
	}
	return n.fsm.addr(string(id))
}

// watchLeader follows leadership: it makes this node ready to stamp once it
// leads and its barrier has applied every earlier entry, announces this
// node's RESP address when the cluster does not know it yet, and routes the
// proposals that waited for a leader. Proposals that wait past their
// deadline get CLUSTERDOWN. It looks every watchEvery while any of that is
// to do; once the group is settled, twice as late after each look that
// found nothing, up to watchIdle: Raft's observations (a leader change, a
// state change, a failed heartbeat) and a waiting proposal wake it at once.
func (n *Node) watchLeader(events <-chan hraft.Observation) {
	defer n.stopped.Done()
	p := pace.Pace{Busy: watchEvery, Idle: watchIdle}
	timer := time.NewTimer(watchEvery)
	defer timer.Stop()
	for {
		woken := false
		select {
		case <-n.stop:
			return
		case o := <-events:
			n.noteHeartbeat(o.Data)
			woken = true
		case <-n.poke:
			woken = true
		case <-timer.C:
		}
		timer.Reset(p.Next(!n.tend() || woken))
	}
}

// How often watchLeader looks while something is to do, and at most how
// long it waits once the group is settled.
const (
	watchEvery = 50 * time.Millisecond
	watchIdle  = time.Second
)

// tend is one look of watchLeader. It reports whether the group is
// settled: a leader is known (ready, if it is this node) and reachable by
// RESP, this node's address is announced, and no proposal waits.
func (n *Node) tend() (settled bool) {
	leading := n.r.State() == hraft.Leader
	if !leading {
		n.ready.Store(false)
	} else if !n.ready.Load() {
		if err := n.r.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
			n.log.Warn("raft: barrier after election failed", "err", err)
			return false
		}
		n.batch.resume(n.fsm.instant.Load())
		n.ready.Store(true)
		n.log.Info("raft: leading", "term", n.r.CurrentTerm())
	}
	n.announce()
	n.retryWaiting()
	n.mu.Lock()
	waiting := len(n.waiting)
	n.mu.Unlock()
	return waiting == 0 && (leading || n.leaderRESP() != "") && n.fsm.addr(n.cfg.ID) == n.cfg.RESPAddr
}

// retryWaiting routes the proposals held for want of a leader again, and
// answers CLUSTERDOWN to those whose time is up.
func (n *Node) retryWaiting() {
	n.mu.Lock()
	waiting := n.waiting
	n.waiting = nil
	n.mu.Unlock()
	now := time.Now()
	var still []proposal
	for _, p := range waiting {
		switch {
		case now.After(p.deadline):
			p.fail(replyDown)
		case !n.send(p):
			still = append(still, p)
		}
	}
	if len(still) > 0 {
		n.mu.Lock()
		n.waiting = append(still, n.waiting...)
		n.mu.Unlock()
	}
}

// Replies for a command that met no working cluster. CLUSTERDOWN: it was
// never proposed, so it did not and will not apply, and resending it is
// safe. UNKNOWN: it was proposed and its outcome is unknown (it may have
// applied, or still apply). Clients resend some errors by themselves:
// go-redis (shouldRetry) CLUSTERDOWN, TRYAGAIN, LOADING, READONLY,
// MASTERDOWN and NOREPLICAS; ioredis in cluster mode and redis-py's cluster
// client CLUSTERDOWN and TRYAGAIN, besides MOVED and ASK. None knows
// UNKNOWN, so none resends a command that may already have applied: a
// TRYAGAIN here made go-redis apply INCRs twice across a leader change
// (e2e TestRaft_DefaultClientRetryAppliesOnce).
var (
	replyDown    = []byte("-CLUSTERDOWN The cluster is down: no leader or no quorum; the command was not applied\r\n")
	replyUnknown = []byte("-UNKNOWN The cluster did not confirm the command; it may have been applied, so resend it only if applying it twice is harmless\r\n")
)
