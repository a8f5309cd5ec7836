package compat

import (
	"context"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testcert"
	"github.com/throttleddb/throttled/server"
)

// TestRedisPy runs clients/python/redispy_compat.py, a redis-py program
// that checks the handshake (AUTH, CLIENT SETNAME, SELECT through a URL),
// strings, counters, expiry on the debug clock, pipelines and MULTI/EXEC,
// WATCH transactions, CL.THROTTLE (redis-cell's vectors), FWC/TB/
// THROTTLE.ALL, EVAL and register_script (EVALSHA, NOSCRIPT, SCRIPT LOAD,
// also in a pipeline), error replies and threads sharing a pool, against a
// node with a password. It uses the first python3 that can import redis:
// the one on PATH, else Debian's /usr/bin/python3 (python3-redis installs
// there, and a pyenv or venv python3 on PATH does not see it). Skipped only
// when there is none; .ci/run installs python3-redis. It runs twice: over
// plain TCP, and over TLS (ssl=True) with a client certificate.
func TestRedisPy(t *testing.T) {
	py := pyFind(t)
	const pass = "s3cret"
	certs := testcert.Make(t)
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"tcp", nil}, {"tls", []string{certs.CACert, certs.ClientCert, certs.ClientKey}}} {
		t.Run(tc.name, func(t *testing.T) {
			n := e2eNode(t, server.Config{RequirePass: pass, TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert})
			addr := n.Addr()
			if tc.extra != nil {
				addr = n.TLSAddr()
			}
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := cliRun(t, nil, py, append([]string{"clients/python/redispy_compat.py", host, port, pass}, tc.extra...)...)
			t.Logf("%s (%v):\n%s%s", py, time.Since(start).Round(time.Millisecond), r.stdout, r.stderr)
			if r.code != 0 {
				t.Fatalf("redispy_compat.py exited with status %d; its output is above", r.code)
			}
		})
	}
}

// pyFind returns a python3 that can import the redis module, or skips.
func pyFind(t *testing.T) string {
	t.Helper()
	var candidates []string
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/usr/bin/python3")
	for _, py := range candidates {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		err := exec.CommandContext(ctx, py, "-c", "import redis").Run()
		cancel()
		if err == nil {
			return py
		}
	}
	t.Skipf("no python3 with the redis module among %q (apt-get install python3-redis)", candidates)
	return ""
}
