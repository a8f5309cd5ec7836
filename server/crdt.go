package server

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/hostport"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/replication/crdt"
	"github.com/throttleddb/throttled/store"
)

// CRDTConfig makes a node one of an active-active mesh (--replication crdt).
type CRDTConfig struct {
	// NodeID is this node's id (--node-id).
	NodeID string
	// ClusterAddr is where the other nodes reach this one (--cluster-addr).
	ClusterAddr string
	// Peers are the other nodes by id (--peers); an entry with this node's
	// id is ignored.
	Peers map[string]string
	// SyncInterval is how often changes are shipped (--crdt-sync-interval,
	// default 5 ms).
	SyncInterval time.Duration
	// MaxSkew is the clock difference tolerated between nodes
	// (--crdt-max-skew, default 100 ms).
	MaxSkew time.Duration
	// Keepalive, in tests, replaces the longest wait between an idle
	// node's watermarks (crdt.DefaultKeepalive).
	Keepalive time.Duration
	// Transport, in tests, carries the mesh's traffic instead of TCP on
	// ClusterAddr.
	Transport crdt.Transport
}

// incarnationFile, in a mesh node's data folder, holds the incarnation of
// its last start. Its presence marks the folder as a mesh node's.
const incarnationFile = "crdt-incarnation"

// meshFiles are the files a mesh start writes before the keyspace's: the
// incarnation and its temporary copy (writeSynced), which a crash during
// the first start can leave alone.
var meshFiles = []string{incarnationFile, incarnationFile + ".tmp"}

// prepareCRDT refuses settings a mesh node cannot run with, then takes this
// start's incarnation (nextIncarnation), before anything else is opened or
// created. Recording it marks the data folder as a mesh node's before the
// store writes there, so a start that fails later (its port in use) leaves
// a folder that the next start accepts.
func prepareCRDT(cfg *Config) (incarnation uint64, err error) {
	if err := checkCRDT(cfg); err != nil {
		return 0, refused(err)
	}
	return nextIncarnation(cfg.Dir)
}

// checkCRDT refuses settings a mesh node cannot run with, and a data
// folder that is not a mesh node's.
func checkCRDT(cfg *Config) error {
	switch {
	case cfg.Raft != nil:
		return errors.New("--replication is either raft or crdt")
	case cfg.MaxKeys != 0 || cfg.MaxMemory != 0:
		// An evicted key's state would come back from the other nodes,
		// and the events only this node had would be lost.
		return errors.New("--maxkeys and --maxmemory cannot be used with --replication crdt")
	case cfg.CRDT.ClusterAddr == "" && cfg.CRDT.Transport == nil:
		return errors.New("--replication crdt needs --cluster-addr, where the other nodes reach this one")
	}
	c := crdtConfig(cfg)
	if err := c.Validate(); err != nil {
		return err
	}
	if cfg.CRDT.Transport == nil {
		// Over TCP a peer whose address can never be dialled would be
		// reported unreachable forever: refuse it now.
		for _, id := range slices.Sorted(maps.Keys(cfg.CRDT.Peers)) {
			if err := hostport.Dialable(cfg.CRDT.Peers[id]); err != nil && id != cfg.CRDT.NodeID {
				return fmt.Errorf("--peers %s: %w", id, err)
			}
		}
	}
	if cfg.Dir != "" {
		return checkMeshFolder(cfg.Dir)
	}
	return nil
}

// checkMeshFolder refuses a folder that holds a single node's data: a mesh
// node's keys are mergeable states, a single node's are plain ones, which a
// mesh node cannot merge.
func checkMeshFolder(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, incarnationFile)); err == nil {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("--dir %q: %w", dir, err)
	}
	if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return !slices.Contains(meshFiles, e.Name()) }) {
		return fmt.Errorf("--dir %q holds data that is not a CRDT node's (no %s): give a mesh node its own folder", dir, incarnationFile)
	}
	return nil
}

// checkNotCRDT refuses to open a mesh node's folder as a single node's: its
// states are not what the commands of a single node read.
func checkNotCRDT(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, incarnationFile)); err == nil {
		return fmt.Errorf("--dir %q is a CRDT node's data folder: start it with --replication crdt", dir)
	}
	return nil
}

func crdtConfig(cfg *Config) crdt.Config {
	c := cfg.CRDT
	out := crdt.Config{
		ID: c.NodeID, Peers: c.Peers, SyncInterval: c.SyncInterval, MaxSkew: c.MaxSkew,
		Keepalive: c.Keepalive, Transport: c.Transport, Logger: cfg.Logger,
	}
	if c.Transport == nil {
		// Over TCP, CRDT PEER ADD refuses what --peers would.
		out.CheckAddr = hostport.Dialable
	}
	return out
}

// nextIncarnation returns this start's incarnation and records it in dir:
// above the last one recorded, and at least the wall clock in ns, so a node
// restarted without its folder still never reuses an earlier start's.
func nextIncarnation(dir string) (uint64, error) {
	inc := uint64(time.Now().UnixNano())
	if dir == "" {
		return inc, nil
	}
	path := filepath.Join(dir, incarnationFile)
	if b, err := os.ReadFile(path); err == nil {
		last, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		inc = max(inc, last+1)
	} else if !os.IsNotExist(err) {
		return 0, err
	}
	if err := persistence.MakeDir(dir); err != nil {
		return 0, err
	}
	if err := writeSynced(path, strconv.FormatUint(inc, 10)+"\n"); err != nil {
		return 0, err
	}
	return inc, nil
}

// writeSynced replaces path with text, durably: a temporary file, synced,
// renamed over it, and the folder synced.
func writeSynced(path, text string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// startCRDT starts the mesh node over st, as the incarnation prepareCRDT
// took, and makes cmds run as one of it.
func startCRDT(cfg *Config, incarnation uint64, cmds *commands.Server, st *store.Store, clk clock.Clock) (*crdt.Node, error) {
	c := crdtConfig(cfg)
	c.Clock, c.Incarnation = clk, incarnation
	if c.Transport == nil {
		c.Transport = crdt.TCP{Addr: cfg.CRDT.ClusterAddr}
	}
	n, err := crdt.Start(c, st)
	if err != nil {
		return nil, fmt.Errorf("--cluster-addr: %w", err)
	}
	cmds.SetMesh(n)
	return n, nil
}
