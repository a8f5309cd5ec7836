package compat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/server"
)

// These tests run the Node.js clients ioredis 5 and node-redis 5 (pinned in
// clients/node/package-lock.json) as real programs against a node with a
// password: clients/node/ioredis.js and clients/node/node-redis.js check the
// handshake (ioredis' INFO ready check; node-redis with and without HELLO),
// strings, counters, expiry on the debug clock, pipelines and MULTI/EXEC,
// WATCH, CL.THROTTLE with redis-cell's vectors, TB/FWC, scripts
// (defineCommand / defineScript, the EVALSHA-NOSCRIPT-EVAL fallback, scripts
// in pipelines and MULTI) and error replies. The first test to run installs
// the packages with `npm ci` unless node_modules already matches the lock
// file. Skipped only when node or npm is missing; .ci/run installs them.

// nodeDir is the Node project, relative to this package.
const nodeDir = "clients/node"

// nodeInstallTimeout bounds `npm ci`.
const nodeInstallTimeout = 5 * time.Minute

var nodeInstall struct {
	once sync.Once
	err  error
	out  string
}

// nodeLook returns the node binary after making sure the packages are
// installed, or skips the test when node or npm is missing.
func nodeLook(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not on PATH: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm not on PATH: %v", err)
	}
	nodeInstall.once.Do(func() {
		nodeInstall.out, nodeInstall.err = nodeEnsureModules(node, npm)
	})
	if nodeInstall.err != nil {
		t.Fatalf("installing the Node packages in %s: %v\n%s", nodeDir, nodeInstall.err, nodeInstall.out)
	}
	return node
}

// nodeEnsureModules runs `npm ci` in nodeDir unless node_modules holds a
// stamp of the same package-lock.json and node version, and writes the
// stamp after a successful install.
func nodeEnsureModules(node, npm string) (string, error) {
	lock, err := os.ReadFile(filepath.Join(nodeDir, "package-lock.json"))
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeInstallTimeout)
	defer cancel()
	ver, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:]) + " " + strings.TrimSpace(string(ver)) + "\n"
	stamp := filepath.Join(nodeDir, "node_modules", ".throttled-compat-stamp")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return "", nil
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), err
	}
	return out.String(), os.WriteFile(stamp, []byte(want), 0o644)
}

// nodeRun runs a client script against a fresh node with a password and
// fails the test, showing what the script printed, unless it exits 0.
func nodeRun(t *testing.T, node, script string, extra ...string) {
	t.Helper()
	const pass = "s3cret"
	n := e2eNode(t, server.Config{RequirePass: pass})
	host, port, err := net.SplitHostPort(n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := cliRun(t, nil, node, append([]string{filepath.Join(nodeDir, script), host, port, pass}, extra...)...)
	t.Logf("%s (%v):\n%s%s", script, time.Since(start).Round(time.Millisecond), r.stdout, r.stderr)
	if r.code != 0 {
		t.Fatalf("%s exited with status %d; its output is above", script, r.code)
	}
}

// TestIORedis runs clients/node/ioredis.js (RESP2: ioredis 5 has no RESP3).
func TestIORedis(t *testing.T) {
	node := nodeLook(t)
	nodeRun(t, node, "ioredis.js")
}

// TestNodeRedis runs clients/node/node-redis.js with each handshake: the
// default (AUTH, no HELLO), RESP: 2 (HELLO 2) and RESP: 3 (HELLO 3).
func TestNodeRedis(t *testing.T) {
	node := nodeLook(t)
	for _, mode := range []string{"default", "2", "3"} {
		t.Run("RESP_"+mode, func(t *testing.T) {
			t.Parallel()
			nodeRun(t, node, "node-redis.js", mode)
		})
	}
}
