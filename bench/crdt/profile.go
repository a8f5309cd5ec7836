package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/internal/proc"
)

// throttled has no profiling endpoint, so -profile builds it with one more
// file, given to go build as an -overlay (the repository is not touched):
// net/http/pprof on the address in $THROTTLED_BENCH_PPROF.
const pprofFile = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("THROTTLED_BENCH_PPROF"); addr != "" {
		go http.ListenAndServe(addr, nil)
	}
}
`

// buildProfiling builds ./cmd/throttled with the pprof endpoint into the
// temp folder, and keeps a copy of the binary in -profile's folder for go
// tool pprof.
func (r *runner) buildProfiling(ctx context.Context) (string, error) {
	src := filepath.Join(r.tmp, "zz_bench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofFile), 0o644); err != nil {
		return "", err
	}
	gomod, err := goModDir(ctx)
	if err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(gomod, "cmd", "throttled", "zz_bench_pprof.go"): src},
	})
	if err != nil {
		return "", err
	}
	ov := filepath.Join(r.tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.cfg.profile, 0o755); err != nil {
		return "", err
	}
	return harness.Build(ctx, "cmd/throttled", filepath.Join(r.cfg.profile, "throttled"), r.logf, "-overlay", ov)
}

func goModDir(ctx context.Context) (string, error) {
	out, err := runOutput(ctx, "go", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(out)), nil
}

// pprofWrap gives a node its pprof address (with -profile): env sets it.
func (r *runner) pprofWrap(n *node) ([]string, error) {
	if r.cfg.profile == "" {
		return nil, nil
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	n.pprof = proc.Addr(port)
	return []string{"env", "THROTTLED_BENCH_PPROF=" + n.pprof}, nil
}

// profileCPU takes a CPU profile of every node in nodes over d, at once,
// into -profile's folder as <name>-<node>.pprof.
func (r *runner) profileCPU(ctx context.Context, nodes []*node, name string, d time.Duration) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			path := filepath.Join(r.cfg.profile, name+"-"+n.id+".pprof")
			if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.pprof, max(1, int(d.Seconds()))), path); err != nil {
				r.logf("profile of %s: %v", n.id, err)
				return
			}
			r.logf("wrote %s", path)
		})
	}
	wg.Wait()
}

func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runOutput(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}
