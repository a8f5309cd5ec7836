package mstate

import (
	"cmp"
	"hash/fnv"
)

// Origin names one writer of mergeable state: a node, in one incarnation.
//
// Node is the 64-bit FNV-1a hash of the node's id (the --node-id string), so
// every node derives every other node's Origin from its id alone, and the
// type stays small and fixed-size (16 bytes encoded). Two ids hashing alike
// would share slots; the node layer refuses a peer whose hash collides with
// another member's (the chance for 100 ids is about 3e-16).
//
// Inc is the incarnation, raised durably on every start. A node that
// restarts without its data must not write under its old Origin: its slots
// would restart at 0 under counts that are merged by max, hiding new use.
// With a new incarnation it is a new writer, and the old one's parts stay
// until they expire.
//
// Origins are ordered by (Node, Inc); encodings list them in that order.
// The zero Origin names the expiry tombstones of strings (see StrIncr) and
// writes no string.
type Origin struct {
	Node, Inc uint64
}

// NewOrigin returns the Origin of the node with the given id in the given
// incarnation.
func NewOrigin(nodeID string, incarnation uint64) Origin {
	h := fnv.New64a()
	h.Write([]byte(nodeID))
	return Origin{Node: h.Sum64(), Inc: incarnation}
}

// Compare orders origins by (Node, Inc): -1, 0 or +1.
func (o Origin) Compare(p Origin) int {
	// (Not cmp.Or, which would compare both fields every time: this runs
	// for every event a state is encoded or joined with.)
	if c := cmp.Compare(o.Node, p.Node); c != 0 {
		return c
	}
	return cmp.Compare(o.Inc, p.Inc)
}
