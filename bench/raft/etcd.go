package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/procattr"
)

// etcd is the 3-member etcd cluster the throttled cluster is compared with,
// set up as etcd's own Procfile sets up one on a machine
// (reference/raft-notes.md, section 13), on free ports.
type etcd struct {
	load    string // the etcdload binary
	members []*etcdMember
}

type etcdMember struct {
	name       string // infra1..infra3
	clientAddr string // host:port of its client URL
	p          *proc.Process
}

// etcdFlags are what every member gets besides its names, URLs and data
// folder: etcd 3.4's defaults otherwise (fsync on, heartbeat 100 ms,
// election 1 s), with zap logging at warn to keep its output short.
var etcdFlags = []string{"--initial-cluster-token", "throttled-bench", "--initial-cluster-state", "new",
	"--logger", "zap", "--log-level", "warn"}

// startEtcd starts infra1..infra3, each with its own data folder, and waits
// until every member reports itself healthy (the cluster has a leader).
func (r *runner) startEtcd(ctx context.Context, load string) (*etcd, error) {
	e := &etcd{load: load}
	r.etcd = e // so that stopAll reaches the members started if one fails
	var initial, peers []string
	ports, err := harness.FreePorts(2 * clusterSize)
	if err != nil {
		return nil, err
	}
	for i := range clusterSize {
		m := &etcdMember{name: fmt.Sprintf("infra%d", i+1), clientAddr: proc.Addr(ports[2*i])}
		e.members = append(e.members, m)
		peers = append(peers, "http://"+proc.Addr(ports[2*i+1]))
		initial = append(initial, m.name+"="+peers[i])
	}
	for i, m := range e.members {
		args := append([]string{"--name", m.name, "--data-dir", filepath.Join(r.tmp, "etcd", m.name),
			"--listen-client-urls", "http://" + m.clientAddr, "--advertise-client-urls", "http://" + m.clientAddr,
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ",")}, etcdFlags...)
		r.logf("starting etcd %s: %s", m.name, strings.Join(args, " "))
		// A member opens its client port at once but answers on it only
		// once the cluster has a quorum, so "up" is the open port: the
		// next member must start for the first to answer.
		p, err := r.start(ctx, proc.Config{Name: "etcd " + m.name, Path: r.cfg.etcdBin, Args: args, Addr: m.clientAddr,
			Ready: portOpen(m.clientAddr)})
		if err != nil {
			return nil, err
		}
		m.p = p
	}
	for _, m := range e.members {
		if err := proc.WaitReady(ctx, "etcd "+m.name, time.Minute, m.p.Exited(), healthy(m.clientAddr)); err != nil {
			return nil, fmt.Errorf("%w\n--- its output ---\n%s", err, m.p.Output())
		}
	}
	r.logf("etcd up")
	return e, nil
}

func (r *runner) stopEtcd() {
	if r.etcd == nil {
		return
	}
	for _, m := range r.etcd.members {
		if m.p == nil {
			continue
		}
		if err := m.p.Stop(); err != nil {
			r.logf("stop etcd %s: %v", m.name, err)
		}
	}
	r.etcd = nil
}

// portOpen is a probe that passes once addr accepts TCP connections.
func portOpen(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
}

// healthy is a probe that passes once etcd's /health at addr says true.
func healthy(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && !bytes.Contains(body, []byte(`"health":"true"`)) {
			err = fmt.Errorf("/health answered %s", bytes.TrimSpace(body))
		}
		return err
	}
}

// put runs etcdload: clients goroutines each put one key at a time into
// the leader for about seconds.
func (e *etcd) put(ctx context.Context, clients int, seconds float64, wrap []string) (redisbench.Figures, error) {
	var addrs []string
	for _, m := range e.members {
		addrs = append(addrs, m.clientAddr)
	}
	args := []string{"-endpoints", strings.Join(addrs, ","), "-clients", strconv.Itoa(clients),
		"-duration", time.Duration(seconds * float64(time.Second)).String()}
	name, argv := proc.CommandLine(wrap, e.load, args)
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.SysProcAttr = procattr.Child()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return redisbench.Figures{}, ctx.Err()
		}
		return redisbench.Figures{}, fmt.Errorf("etcdload %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	var rep loadReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return redisbench.Figures{}, fmt.Errorf("etcdload's report: %w", err)
	}
	return rep.figures()
}

// loadReport is what etcdload prints (its Report).
type loadReport struct {
	Endpoint  string  `json:"endpoint"`
	ElapsedNS int64   `json:"elapsed_ns"`
	LatencyUS []int64 `json:"latencies_us"`
}

// figures turns the report into throughput and latency percentiles.
func (l loadReport) figures() (redisbench.Figures, error) {
	if len(l.LatencyUS) == 0 || l.ElapsedNS <= 0 {
		return redisbench.Figures{}, fmt.Errorf("etcdload made no puts (%d in %d ns)", len(l.LatencyUS), l.ElapsedNS)
	}
	lat := slices.Sorted(slices.Values(l.LatencyUS))
	return redisbench.Figures{
		RPS: float64(len(lat)) / (float64(l.ElapsedNS) / 1e9),
		P50: float64(harness.Percentile(lat, 50)) / 1000,
		P99: float64(harness.Percentile(lat, 99)) / 1000,
	}, nil
}
