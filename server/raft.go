package server

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/hostport"
	"github.com/throttleddb/throttled/internal/tlsconf"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/persistence/raftlog"
	"github.com/throttleddb/throttled/replication/raft"
	"github.com/throttleddb/throttled/store"
)

// RaftConfig makes a node a member of a Raft group (--replication raft).
type RaftConfig struct {
	// NodeID is this member's id (--node-id).
	NodeID string
	// ClusterAddr is where Raft traffic reaches this member (--cluster-addr).
	ClusterAddr string
	// AnnounceAddr is the RESP address other members and RAFT LEADER give
	// out (--announce-addr; default the address the node listens on).
	AnnounceAddr string
	// Peers bootstraps a new cluster: every member by id, this one
	// included (--peers).
	Peers map[string]string
	// Join is the RESP address of a member of the cluster to join (--join).
	Join string
	// RestoreFrom is a BACKUP folder a new one-member group starts from
	// (--restore-from): the member loads it, then makes it the group's
	// first snapshot (raft.Config.Seeded); members added with --join get
	// it from there. Refused once the member holds Raft state.
	RestoreFrom string
	// ApplyTimeout bounds a command's wait for the cluster
	// (--raft-apply-timeout, default 2s).
	ApplyTimeout time.Duration
	// Tuning is Raft's timeouts and log retention (tests shorten them;
	// default raft.DefaultTuning).
	Tuning raft.Tuning
	// Parts, in tests, are in-memory Raft stores and transport to run on;
	// nil opens the log and snapshots under the data folder and listens on
	// ClusterAddr.
	Parts *raft.Parts
}

// raftFolder is where a Raft member keeps its log and snapshots, under the
// data folder: the log in raft/log (a Pebble database of its own, synced on
// every append), snapshots of the keyspace in raft/snapshots.
const raftFolder = "raft"

// raftNode is a started Raft member and its log, which it must close.
type raftNode struct {
	*raft.Node
	logs *raftlog.Store
}

// checkRaft refuses settings a Raft member cannot run with, before anything
// is opened or created.
func checkRaft(cfg *Config) error {
	switch {
	case cfg.Dir == "":
		return errors.New("--replication raft needs a data folder: give --dir and leave --persistence on")
	case cfg.TLSReplication && cfg.TLSPort == 0:
		// Followers forward commands to the leader's RESP address, which
		// is its TLS port under tls-replication.
		return errors.New("--tls-replication yes needs --tls-port: members forward commands to the leader's TLS port")
	case !cfg.TLSReplication && cfg.Port == 0:
		return errors.New("--replication raft needs the plain --port, or --tls-replication yes: members forward commands to the leader over it")
	case cfg.MaxKeys != 0 || cfg.MaxMemory != 0:
		// Eviction picks its victims by sampling each node's own hash
		// layout: replicas would evict different keys and diverge.
		return errors.New("--maxkeys and --maxmemory cannot be used with --replication raft")
	}
	if a := cfg.Raft.AnnounceAddr; a != "" {
		if err := checkAnnounce(a, "--announce-addr"); err != nil {
			return err
		}
	}
	rc := raftConfig(cfg, "")
	if err := rc.Validate(); err != nil {
		return err
	}
	if from := cfg.Raft.RestoreFrom; from != "" {
		// Opening a missing or empty folder would create an empty
		// database and start the group from nothing.
		if entries, err := os.ReadDir(from); err != nil || len(entries) == 0 {
			return fmt.Errorf("--restore-from %q: not a BACKUP folder (missing or empty)", from)
		}
	}
	// A member keeps only raft/ in its folder. Anything else is most
	// likely a single node's keyspace, which a member would not load:
	// refuse it rather than start empty beside it.
	entries, err := os.ReadDir(cfg.Dir)
	for _, e := range entries {
		if e.Name() != raftFolder {
			return fmt.Errorf("--dir %q holds %q, which is not a Raft member's (a single node's data?): a member keeps only %s/ there; give it another folder", cfg.Dir, e.Name(), raftFolder)
		}
	}
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("--dir %q: %w", cfg.Dir, err)
	}
	if len(entries) == 0 && len(cfg.Raft.Peers) == 0 && cfg.Raft.Join == "" && cfg.Raft.Parts == nil {
		// Refused before anything is created; raft.Start refuses the
		// same for a raft/ folder that holds no state.
		return raft.ErrNoCluster
	}
	return nil
}

// checkAnnounce refuses a RESP address other members and clients cannot
// dial: not host:port, a port outside 1-65535, or a wildcard host. A
// wildcard (0.0.0.0, ::) listens on every interface but names none: a
// follower given 0.0.0.0:port by RAFT LEADER would dial itself. No one
// address can be derived from it (the machine may have several), so the
// operator names it with --announce-addr.
func checkAnnounce(addr, what string) error {
	if err := hostport.Check(addr); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if hostport.Wildcard(addr) {
		return fmt.Errorf("%s: %s is a wildcard address, which other members and clients cannot dial: give --announce-addr host:port, the address they reach this member at", what, addr)
	}
	return nil
}

// raftConfig is the member's settings; listenAddr is the RESP address it
// announces unless --announce-addr says otherwise.
func raftConfig(cfg *Config, listenAddr string) raft.Config {
	r := cfg.Raft
	return raft.Config{
		ID:           r.NodeID,
		ClusterAddr:  r.ClusterAddr,
		RESPAddr:     cmp.Or(r.AnnounceAddr, listenAddr),
		Peers:        r.Peers,
		Join:         r.Join,
		Seeded:       r.RestoreFrom != "",
		Password:     cfg.RequirePass,
		ApplyTimeout: r.ApplyTimeout,
		Tuning:       r.Tuning,
		Logger:       cfg.Logger,
	}
}

// startRaft opens the Raft log and snapshots under the data folder, listens
// for Raft traffic and starts the member serving cmds. Under
// tls-replication (certs not nil) the Raft traffic and the forwarding to the
// leader use mutual TLS with certs.
func startRaft(cfg *Config, cmds *commands.Server, listenAddr string, certs *tlsconf.Certs, clk interface{ Now() int64 }) (*raftNode, error) {
	if cfg.Raft.AnnounceAddr == "" {
		if err := checkAnnounce(listenAddr, "--bind "+cfg.Bind); err != nil {
			return nil, refused(err)
		}
	}
	rc := raftConfig(cfg, listenAddr)
	rc.Clock = clk
	if cfg.TLSReplication {
		rc.TLS = certs.MemberClient()
	}
	if p := cfg.Raft.Parts; p != nil {
		n, err := raft.Start(rc, cmds, *p)
		if err != nil {
			return nil, err
		}
		return &raftNode{Node: n}, nil
	}
	dir := filepath.Join(cfg.Dir, raftFolder)
	if err := persistence.MakeDir(dir); err != nil {
		return nil, err
	}
	logs, err := raftlog.Open(raftlog.Options{Dir: filepath.Join(dir, "log"), Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	hl := raft.NewHclog(cfg.Logger)
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		logs.Close()
		return nil, err
	}
	advertise, err := net.ResolveTCPAddr("tcp", rc.ClusterAddr)
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("--cluster-addr: %w", err)
	}
	tc := &hraft.NetworkTransportConfig{MaxPool: 3, Timeout: 10 * time.Second, Logger: hl}
	var trans *hraft.NetworkTransport
	if cfg.TLSReplication {
		trans, err = raft.NewTLSTransport(rc.ClusterAddr, advertise, certs.MemberServer(), certs.MemberClient(), tc)
	} else {
		trans, err = hraft.NewTCPTransportWithConfig(rc.ClusterAddr, advertise, tc)
	}
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("--cluster-addr: %w", err)
	}
	n, err := raft.Start(rc, cmds, raft.Parts{Logs: logs, Stable: logs, Snaps: snaps, Trans: trans})
	if err != nil {
		trans.Close()
		logs.Close()
		if errors.Is(err, raft.ErrConfig) {
			// Such as a removed member restarted with --join: starting
			// again would be refused the same way.
			return nil, refused(err)
		}
		return nil, err
	}
	return &raftNode{Node: n, logs: logs}, nil
}

// loadBackup loads the BACKUP folder dir into st before a member seeds a
// new group with it. The folder is opened as a data folder, so keys expired
// at now are dropped from it too; st records nothing for persistence (a
// member's store has no journal), so the folder is closed after.
func loadBackup(dir string, st *store.Store, now int64, log *slog.Logger) error {
	pdb, err := persistence.Open(persistence.Options{Dir: dir, Logger: log})
	if err != nil {
		return fmt.Errorf("--restore-from: %w", err)
	}
	keys, err := pdb.Load(st, now)
	if err = errors.Join(err, pdb.Close()); err != nil {
		return fmt.Errorf("--restore-from: %w", err)
	}
	log.Info("loaded the backup the new group starts from", "dir", dir, "keys", keys)
	return nil
}

// close stops the member and closes its log.
func (r *raftNode) close() error {
	err := r.Node.Close()
	if r.logs != nil {
		err = errors.Join(err, r.logs.Close())
	}
	return err
}
