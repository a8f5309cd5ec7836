// Package netns gives a test a network namespace of its own, joined to the
// test's by a veth pair, so that a client can reach a server from an
// address that is not loopback (protected mode) without the machine's own
// network: the server binds the host side of the pair, the client runs in
// the namespace. It needs root (CAP_NET_ADMIN) and iproute2's ip; New
// skips the test where it cannot make one.
package netns

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// NS is a namespace and the veth pair that joins it to the test's.
type NS struct {
	Name string // for ip netns exec
	Host string // the address of the pair's end outside: servers bind it
	Peer string // the address of the end inside: clients come from it
}

// New makes a namespace for t, removed when t ends. Its addresses are a
// /30 of 10.0.0.0/8 picked at random, so tests running at once (or other
// programs' pairs) do not collide in practice.
func New(t testing.TB) *NS {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2): cannot make a network namespace")
	}
	tag := fmt.Sprintf("%06x", rand.IntN(1<<24))
	net := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(256))
	last := 4 * rand.IntN(64)
	n := &NS{Name: "thr" + tag, Host: net + strconv.Itoa(last+1), Peer: net + strconv.Itoa(last+2)}
	host, peer := "thrh"+tag, "thrp"+tag
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace (not root?): %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", host).Run() // takes its peer along
		if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.Name, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.Name},
		{"addr", "add", n.Host + "/30", "dev", host},
		{"link", "set", host, "up"},
		{"netns", "exec", n.Name, "ip", "addr", "add", n.Peer + "/30", "dev", peer},
		{"netns", "exec", n.Name, "ip", "link", "set", peer, "up"},
		{"netns", "exec", n.Name, "ip", "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return n
}

// Command returns the command name args, to run in the namespace.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}
