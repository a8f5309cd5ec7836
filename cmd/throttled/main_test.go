package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/store"
)

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.conf")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# comment\nport 7777\nrequirepass \"s3 cret\"\n\ndatabases 4\nmaxmemory 64mb\nthreads 3\nslowlog-log-slower-than 0\nslowlog-max-len 5\nlatency-monitor-threshold 100\n")
	fs, cfg := newFlags(&bytes.Buffer{})
	if err := fs.Parse([]string{"--config", path, "--port", "8888"}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyConfigFile(fs, path, map[string]bool{"port": true, "config": true}); err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 8888 || cfg.RequirePass != "s3 cret" || cfg.Databases != 4 || cfg.MaxMemory != 64<<20 || cfg.Threads != 3 {
		t.Fatalf("got port %d, pass %q, dbs %d, maxmemory %d, threads %d; want the flag's 8888, the file's \"s3 cret\", 4, 64 MiB and 3",
			cfg.Port, cfg.RequirePass, cfg.Databases, cfg.MaxMemory, cfg.Threads)
	}
	if got := *cfg.Slowlog; got != (commands.SlowlogConfig{SlowerThan: 0, MaxLen: 5}) {
		t.Fatalf("slowlog settings: got %+v, want the file's 0 and 5", got)
	}
	if cfg.LatencyMonitorThreshold != 100 {
		t.Fatalf("latency-monitor-threshold %d, want the file's 100", cfg.LatencyMonitorThreshold)
	}
	for _, bad := range []string{"nosuch 1\n", "port abc\n", "config other.conf\n", "maxmemory 1tb\n", "version yes\n"} {
		write(bad)
		fs, _ := newFlags(&bytes.Buffer{})
		if _, err := applyConfigFile(fs, path, nil); err == nil {
			t.Errorf("config %q: no error", bad)
		}
	}
}

// TestRun_Version: --version and -v print one line in redis-server's
// shape, with redis-server's fields in redis-server's order, and exit 0.
func TestRun_Version(t *testing.T) {
	line := regexp.MustCompile(`^throttled server v=` + regexp.QuoteMeta(commands.Version) +
		` redis=7\.0\.15 sha=[0-9a-f]{8}:[01] go=go[^ ]+ bits=(32|64) build=[0-9a-f]+\n$`)
	var out bytes.Buffer
	for _, arg := range []string{"-v", "--version"} {
		out.Reset()
		if err := run([]string{arg}, &out, io.Discard); err != nil || !line.MatchString(out.String()) {
			t.Errorf("%s: got %q, %v", arg, out.String(), err)
		}
	}
	redis, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		t.Skipf("redis-server --version: %v", err)
	}
	// Redis' fields (v, sha, malloc, bits, build): ours has them all but
	// malloc (go stands in its place), in the same order.
	fields := func(s string) (names []string) {
		for _, f := range strings.Fields(s)[2:] {
			name, _, _ := strings.Cut(f, "=")
			if name != "malloc" && name != "redis" && name != "go" {
				names = append(names, name)
			}
		}
		return names
	}
	if got, want := fields(out.String()), fields(string(redis)); !slices.Equal(got, want) {
		t.Errorf("fields %q, redis-server's %q (%q)", got, want, redis)
	}
	if !strings.HasSuffix(strings.Fields(string(redis))[1], "server") {
		t.Errorf("redis-server --version: %q", redis)
	}
}

func TestRun_BadSettings(t *testing.T) {
	for _, args := range [][]string{
		{"--slowlog-log-slower-than", "-2"},
		{"--slowlog-max-len", "-1"},
		{"--latency-monitor-threshold", "-1"},
	} {
		err := run(append(args, "--persistence", "off", "--port", "0"), io.Discard, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), args[0]+": ") {
			t.Errorf("%q: got %v, want an error about %s", args, err, args[0])
		}
	}
}

// TestConfigFile_Clients: the TLS, protected-mode and client-limit lines
// of a redis.conf load as Redis reads them: yes/no, sizes in Redis units,
// seconds, several client-output-buffer-limit lines (one per class) and a
// bind line of several addresses.
func TestConfigFile_Clients(t *testing.T) {
	path := filepath.Join(t.TempDir(), "redis.conf")
	conf := `bind 127.0.0.1 -::1
tls-port 6380
tls-cert-file /etc/throttled/tls/server.crt
tls-key-file /etc/throttled/tls/server.key
tls-ca-cert-file /etc/throttled/tls/ca.crt
tls-auth-clients optional
tls-replication yes
protected-mode no
maxclients 50
timeout 30
tcp-keepalive 60
client-query-buffer-limit 2mb
client-output-buffer-limit normal 1mb 512kb 10
client-output-buffer-limit replica 256mb 64mb 60
client-output-buffer-limit pubsub 32mb 8mb 60
`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, s := newFlags(&bytes.Buffer{})
	if _, err := applyConfigFile(fs, path, nil); err != nil {
		t.Fatal(err)
	}
	c := s.clients
	if s.Bind != "127.0.0.1 -::1" || s.TLSPort != 6380 || s.TLSCACertFile != "/etc/throttled/tls/ca.crt" || s.TLSAuthClients != "optional" || !s.TLSReplication || s.protected {
		t.Errorf("got bind %q, tls-port %d, CA %q, auth %q, tls-replication %v, protected %v", s.Bind, s.TLSPort, s.TLSCACertFile, s.TLSAuthClients, s.TLSReplication, s.protected)
	}
	if c.MaxClients != 50 || c.Timeout != 30*time.Second || c.KeepAlive != time.Minute || c.MaxQueryLen != 2<<20 {
		t.Errorf("got maxclients %d, timeout %v, keepalive %v, query limit %d", c.MaxClients, c.Timeout, c.KeepAlive, c.MaxQueryLen)
	}
	if got, want := c.OutputLimits(), "normal 1048576 524288 10 slave 268435456 67108864 60 pubsub 33554432 8388608 60"; got != want {
		t.Errorf("client-output-buffer-limit %q, want %q", got, want)
	}
	for _, bad := range []string{"protected-mode maybe\n", "tls-replication on\n", "timeout -1\n", "tcp-keepalive 1.5\n",
		"client-output-buffer-limit normal 1 2\n", "client-output-buffer-limit master 1 2 3\n", "client-query-buffer-limit lots\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		fs, _ := newFlags(&bytes.Buffer{})
		if _, err := applyConfigFile(fs, path, nil); err == nil {
			t.Errorf("config %q: no error", bad)
		}
	}
	for _, args := range [][]string{{"--maxclients", "0"}, {"--client-query-buffer-limit", "1kb"}} {
		if err := run(args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("run %q: %v, want an error about %s", args, err, args[0])
		}
	}
}

// TestRun_ServesAndStopsOnSignal builds the binary, runs it as a user would
// (with two event loops and metrics) and stops it with SIGINT.
func TestRun_ServesAndStopsOnSignal(t *testing.T) {
	bin := throttledBinary(t)
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--dir", t.TempDir(), "--threads", "2",
		"--metrics-addr", proc.Addr(metricsPort))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	const want = "+PONG\r\n*2\r\n$7\r\nthreads\r\n$1\r\n2\r\n"
	var reply string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("PING\r\nCONFIG GET threads\r\n"))
		buf := make([]byte, len(want))
		n, _ := io.ReadFull(c, buf)
		c.Close()
		reply = string(buf[:n])
		break
	}
	if reply != want {
		t.Fatalf("PING and CONFIG GET threads answered %q; server log:\n%s", reply, stderr.String())
	}
	resp, err := http.Get("http://" + proc.Addr(metricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(metrics), "\nthrottled_commands_total{command=\"ping\"} 1\n") {
		t.Fatalf("/metrics (%v) lacks the PING:\n%s", err, metrics)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Fatalf("no shutdown line in the log:\n%s", stderr.String())
	}
}

// TestRun_BadReplicationSettings: each bad setting stops the start with one
// line naming it, and nothing is created on disk.
func TestRun_BadReplicationSettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	raft := []string{"--replication", "raft", "--node-id", "n1", "--cluster-addr", "127.0.0.1:7001", "--dir", dir}
	crdt := []string{"--replication", "crdt", "--node-id", "x", "--cluster-addr", "127.0.0.1:7001", "--dir", dir}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(raft, "--peers", "n1=127.0.0.1:7001,n1=127.0.0.1:7002"), `id "n1" is given twice`},
		{append(raft, "--peers", "n1=127.0.0.1:7001,n2=127.0.0.1:7001"), "have the same address"},
		{append(raft, "--peers", "n2=127.0.0.1:7002,n3=127.0.0.1:7003"), `own id "n1"`},
		{append(raft, "--peers", "n1=127.0.0.1:7009"), "--cluster-addr is 127.0.0.1:7001"},
		{append(raft, "--peers", "n1=127.0.0.1:7001", "--join", "127.0.0.1:6379"), "--join and --peers"},
		{append(raft, "--peers", "n1=nohost"), `n1: "nohost": want host:port`},
		{append(raft, "--peers", "n1=127.0.0.1:7001,n2=127.0.0.1:99999"), "n2: \"127.0.0.1:99999\": the port must be a number from 1 to 65535"},
		{append(crdt, "--peers", "y=127.0.0.1:notaport"), "--peers: y: \"127.0.0.1:notaport\": the port must be a number from 1 to 65535"},
		{append(crdt, "--peers", "y=127.0.0.1:7002,y=127.0.0.1:7003"), `id "y" is given twice`},
		{append(raft, "--persistence", "off"), "needs a data folder"},
		{raft, "neither --peers (to start a new cluster) nor --join (to join one)"},
		{append(raft, "--maxkeys", "10"), "cannot be used with --replication raft"},
		{append(raft, "--raft-apply-timeout", "0s"), "must be positive"},
		{[]string{"--replication", "raft", "--cluster-addr", "127.0.0.1:7001", "--dir", dir}, "--node-id is required"},
		{[]string{"--peers", "n1=127.0.0.1:7001", "--dir", dir}, "--peers: only with --replication raft"},
		{[]string{"--replication", "paxos", "--dir", dir}, "want none, raft or crdt"},
	} {
		var stderr bytes.Buffer
		err := run(tc.args, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want one line with %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%v: the data folder exists after a refused start (%v)", tc.args, err)
		}
	}
}

// TestConfigFile_Replication: the replication settings work from the
// config file too.
func TestConfigFile_Replication(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.conf")
	conf := "replication raft\nnode-id n2\ncluster-addr 127.0.0.1:7002\nannounce-addr 10.0.0.2:6379\n" +
		"peers n1=127.0.0.1:7001,n2=127.0.0.1:7002\nraft-apply-timeout 500ms\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, s := newFlags(&bytes.Buffer{})
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyConfigFile(fs, path, map[string]bool{"config": true}); err != nil {
		t.Fatal(err)
	}
	if err := s.replicationConfig(fs); err != nil {
		t.Fatal(err)
	}
	r := s.Raft
	if r == nil || r.NodeID != "n2" || r.ClusterAddr != "127.0.0.1:7002" || r.AnnounceAddr != "10.0.0.2:6379" ||
		len(r.Peers) != 2 || r.Peers["n1"] != "127.0.0.1:7001" || r.ApplyTimeout != 500*time.Millisecond {
		t.Fatalf("got %+v", r)
	}
}

// TestRun_RaftRefusesSingleNodeFolder: a Raft member does not start on a
// single node's data folder (it would not load it), and a single node does
// not start on a member's; neither changes a file.
func TestRun_RaftRefusesSingleNodeFolder(t *testing.T) {
	single := t.TempDir()
	if err := os.WriteFile(filepath.Join(single, "MANIFEST-000001"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--replication", "raft", "--node-id", "n1", "--cluster-addr", "127.0.0.1:7001",
		"--peers", "n1=127.0.0.1:7001", "--dir", single}
	err := run(args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a Raft member's") {
		t.Fatalf("raft on a single node's folder: %v", err)
	}
	if entries, _ := os.ReadDir(single); len(entries) != 1 {
		t.Fatalf("the folder changed: %v", entries)
	}
	member := t.TempDir()
	if err := os.Mkdir(filepath.Join(member, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"--port", strconv.Itoa(port), "--dir", member}, io.Discard, io.Discard); err == nil {
		t.Fatal("a single node started on a Raft member's folder")
	}
	if entries, _ := os.ReadDir(member); len(entries) != 1 {
		t.Fatalf("the member's folder changed: %v", entries)
	}
}

// TestExampleSystemd keeps examples/systemd working: the sample config file
// loads, the unit starts throttled on it with the data folder the config
// names, and, where systemd-analyze is installed, the unit verifies and its
// hardening keeps systemd's exposure score at 2.0 or below.
func TestExampleSystemd(t *testing.T) {
	const dir = "../../examples/systemd/"
	fs, cfg := newFlags(&bytes.Buffer{})
	if _, err := applyConfigFile(fs, dir+"throttled.conf", nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Dir != "/var/lib/throttled" || cfg.MetricsAddr != "127.0.0.1:9121" || cfg.Bind != "127.0.0.1" {
		t.Errorf("throttled.conf: dir %q, metrics-addr %q, bind %q", cfg.Dir, cfg.MetricsAddr, cfg.Bind)
	}
	unit, err := os.ReadFile(dir + "throttled.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"ExecStart=/usr/local/bin/throttled --config /etc/throttled/throttled.conf",
		"Type=notify",              // READY=1 from sdNotify
		"StateDirectory=throttled", // /var/lib/throttled, the config's dir
		"User=throttled",
		"Restart=on-failure",
		fmt.Sprintf("RestartPreventExitStatus=%d", exitRefused), // refused settings are not retried
	} {
		if !strings.Contains(string(unit), "\n"+line+"\n") {
			t.Errorf("throttled.service lacks %q", line)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	// verify wants the binary ExecStart names to exist: use this one.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "throttled.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/throttled", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out, err := exec.Command(analyze, "security", "--offline=true", "--threshold=20", path).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v)\n%s", err, out)
	}
}

// TestMaxMemoryPolicy: --maxmemory-policy and the maxmemory-policy
// directive take Redis' names; volatile-ttl (evicting, today's order) is
// the default, and a name the store cannot follow is refused.
func TestMaxMemoryPolicy(t *testing.T) {
	fs, cfg := newFlags(&bytes.Buffer{})
	if err := fs.Parse(nil); err != nil || cfg.MaxMemoryPolicy != store.VolatileTTL {
		t.Fatalf("default: %v, %v; want volatile-ttl", cfg.MaxMemoryPolicy, err)
	}
	if err := fs.Parse([]string{"--maxmemory-policy", "noeviction"}); err != nil || cfg.MaxMemoryPolicy != store.NoEviction {
		t.Fatalf("flag: %v, %v; want noeviction", cfg.MaxMemoryPolicy, err)
	}
	path := filepath.Join(t.TempDir(), "t.conf")
	for conf, want := range map[string]store.EvictionPolicy{"maxmemory-policy allkeys-lru\n": store.AllKeysLRU, "maxmemory-policy noeviction\n": store.NoEviction} {
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		fs, cfg := newFlags(&bytes.Buffer{})
		if _, err := applyConfigFile(fs, path, nil); err != nil || cfg.MaxMemoryPolicy != want {
			t.Errorf("config %q: %v, %v; want %v", conf, cfg.MaxMemoryPolicy, err, want)
		}
	}
	fs, _ = newFlags(io.Discard)
	if err := fs.Parse([]string{"--maxmemory-policy", "allkeys-lfu"}); err == nil || !strings.Contains(err.Error(), "volatile-ttl, allkeys-lru, noeviction") {
		t.Errorf("allkeys-lfu: %v, want the list of policies", err)
	}
}
