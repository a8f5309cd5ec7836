package crdt

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/resp"
)

// PeerInfo is what CRDT PEERS and INFO say of a peer.
type PeerInfo struct {
	ID, Addr  string
	Connected bool  // batches go out to it and come in from it
	LagMs     int64 // how far its watermark is behind this node's clock; -1 before the first
}

// Peers returns the peers, ordered by id.
func (n *Node) Peers() []PeerInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]PeerInfo, 0, len(n.peers))
	for _, id := range slices.Sorted(maps.Keys(n.peers)) {
		p := n.peers[id]
		out = append(out, PeerInfo{ID: id, Addr: p.addr, Connected: p.link != nil && len(p.in) > 0, LagMs: n.lagMs(p)})
	}
	return out
}

// AddPeer makes id a peer at run time (CRDT PEER ADD).
func (n *Node) AddPeer(id, addr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id == n.cfg.ID {
		return errString("ERR that is this node's own id")
	}
	if _, ok := n.peers[id]; ok {
		return errString("ERR node " + id + " is already a peer (CRDT PEER REMOVE it first to change its address)")
	}
	seen := map[mstate.Origin]string{mstate.NewOrigin(n.cfg.ID, 0): n.cfg.ID}
	for pid := range n.peers {
		seen[mstate.NewOrigin(pid, 0)] = pid
	}
	if err := checkPeer(id, addr, seen); err != nil {
		return errString("ERR " + strings.TrimPrefix(err.Error(), ErrConfig.Error()+": "))
	}
	if n.cfg.CheckAddr != nil {
		if err := n.cfg.CheckAddr(addr); err != nil {
			return errString("ERR peer " + id + ": " + err.Error())
		}
	}
	n.addPeer(id, addr)
	n.log.Info("peer added", "peer", id, "addr", addr)
	return nil
}

// RemovePeer stops exchanging with id (CRDT PEER REMOVE): its watermark no
// longer holds back folding, and its connections close.
func (n *Node) RemovePeer(id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.peers[id]
	if !ok {
		return errString("ERR no peer " + id)
	}
	p.stop()
	if p.link != nil {
		p.link.close()
	}
	for c := range p.in {
		c.Close()
	}
	delete(n.peers, id)
	n.log.Info("peer removed", "peer", id)
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

// Command runs a CRDT subcommand (args[0] is "CRDT") and writes its reply.
func (n *Node) Command(args [][]byte, w *resp.Writer) {
	sub := ""
	if len(args) > 1 {
		sub = strings.ToUpper(string(args[1]))
	}
	switch {
	case sub == "PEERS" && len(args) == 2:
		peers := n.Peers()
		w.Array(len(peers))
		for _, p := range peers {
			w.Array(4)
			w.Bulk([]byte(p.ID))
			w.Bulk([]byte(p.Addr))
			w.Int(boolInt(p.Connected))
			w.Int(p.LagMs)
		}
	case sub == "PEER" && len(args) == 5 && strings.EqualFold(string(args[2]), "ADD"):
		reply(w, n.AddPeer(string(args[3]), string(args[4])))
	case sub == "PEER" && len(args) == 4 && strings.EqualFold(string(args[2]), "REMOVE"):
		reply(w, n.RemovePeer(string(args[3])))
	case sub == "HELP" && len(args) == 2:
		lines := []string{
			"CRDT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"PEERS",
			"    Return one [id, address, connected (0 or 1), lag_ms] per peer.",
			"PEER ADD <id> <host:port>",
			"    Start exchanging with a node at its cluster address.",
			"PEER REMOVE <id>",
			"    Stop exchanging with a node.",
			"HELP",
			"    Print this help.",
		}
		w.Array(len(lines))
		for _, l := range lines {
			w.Status(l)
		}
	default:
		w.Error("ERR unknown subcommand or wrong number of arguments for '" + string(args[min(1, len(args)-1)]) + "'. Try CRDT HELP.")
	}
}

func reply(w *resp.Writer, err error) {
	if err != nil {
		w.Error(err.Error())
		return
	}
	w.Status("OK")
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// AppendInfo appends INFO replication's lines to b.
func (n *Node) AppendInfo(b []byte) []byte {
	peers := n.Peers()
	b = append(b, "crdt_node_id:"+n.cfg.ID+"\r\n"...)
	b = append(b, "crdt_incarnation:"+strconv.FormatUint(n.cfg.Incarnation, 10)+"\r\n"...)
	b = append(b, "crdt_peers:"+strconv.Itoa(len(peers))+"\r\n"...)
	for _, p := range peers {
		b = append(b, "crdt_peer_"+p.ID+":addr="+p.Addr+",connected="+strconv.FormatInt(boolInt(p.Connected), 10)+
			",lag_ms="+strconv.FormatInt(p.LagMs, 10)+"\r\n"...)
	}
	return b
}
