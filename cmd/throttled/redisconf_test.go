package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
	"github.com/throttleddb/throttled/resp"
)

// debianConf is the redis.conf Debian's redis-server package installs.
const debianConf = "/etc/redis/redis.conf"

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the binary throttledBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// throttledBinary builds this command once for the tests that run it as
// a user does.
func throttledBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		if binary.dir, binary.err = os.MkdirTemp("", "throttled-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "throttled")
		if out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// runBinary runs the binary to its end and returns its exit status and
// output.
func runBinary(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, throttledBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// startBinary starts the binary, with args, on a free port and waits for
// it to answer PING; the test stops it at its end.
func startBinary(t *testing.T, args ...string) (*proc.Process, string) {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := proc.Addr(port)
	p, err := proc.Start(context.Background(), proc.Config{Name: "throttled", Path: throttledBinary(t),
		Args: append(args, "--port", strconv.Itoa(port)), Addr: addr, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p, addr
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRun_Help: --help, -help and -h print the usage and every flag on
// stdout and exit 0; a flag that does not exist is one line on stderr that
// points to --help, with the exit status of refused settings.
func TestRun_Help(t *testing.T) {
	fs, _ := newFlags(&bytes.Buffer{})
	for _, arg := range []string{"--help", "-help", "-h"} {
		status, stdout, stderr := runBinary(t, arg)
		if status != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: throttled ") {
			t.Errorf("%s: exit %d, stderr %q, stdout begins %.40q", arg, status, stderr, stdout)
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !regexp.MustCompile(`\n  -` + regexp.QuoteMeta(f.Name) + `[ \t\n]`).MatchString(stdout) {
				t.Errorf("%s does not list -%s", arg, f.Name)
			}
		})
	}
	status, stdout, stderr := runBinary(t, "--nosuch")
	if status != exitRefused || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "-nosuch") || !strings.Contains(stderr, "--help") {
		t.Errorf("--nosuch: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
}

// lineOutcome is what one config line does.
type lineOutcome int

const (
	setsFlag lineOutcome = iota // sets the flag of its name
	warns                       // accepted with one warning
	silent                      // accepted without a word: it asks for what throttled does
)

// debianDirectives is, for every directive of Debian's stock redis.conf
// (redis-server 7.0.15), what its line does here; for a flag, the value
// the flag then shows.
var debianDirectives = map[string]struct {
	outcome lineOutcome
	value   string
}{
	"bind": {setsFlag, "127.0.0.1 -::1"}, "protected-mode": {setsFlag, "yes"}, "port": {setsFlag, "6379"},
	"timeout": {setsFlag, "0"}, "tcp-keepalive": {setsFlag, "300"}, "pidfile": {setsFlag, "/run/redis/redis-server.pid"},
	"loglevel": {setsFlag, "notice"}, "logfile": {setsFlag, "/var/log/redis/redis-server.log"}, "databases": {setsFlag, "16"},
	"dir": {setsFlag, "/var/lib/redis"}, "appendfsync": {setsFlag, "everysec"}, "slowlog-log-slower-than": {setsFlag, "10000"},
	"slowlog-max-len": {setsFlag, "128"}, "latency-monitor-threshold": {setsFlag, "0"},
	"client-output-buffer-limit": {setsFlag, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"},

	"always-show-logo": {silent, ""}, "stop-writes-on-bgsave-error": {silent, ""}, "oom-score-adj": {silent, ""},
	"aof-load-truncated": {silent, ""}, "notify-keyspace-events": {silent, ""},

	"tcp-backlog": {warns, ""}, "daemonize": {warns, ""}, "set-proc-title": {warns, ""}, "proc-title-template": {warns, ""},
	"rdbcompression": {warns, ""}, "rdbchecksum": {warns, ""}, "dbfilename": {warns, ""}, "rdb-del-sync-files": {warns, ""},
	"replica-serve-stale-data": {warns, ""}, "replica-read-only": {warns, ""}, "repl-diskless-sync": {warns, ""},
	"repl-diskless-sync-delay": {warns, ""}, "repl-diskless-sync-max-replicas": {warns, ""}, "repl-diskless-load": {warns, ""},
	"repl-disable-tcp-nodelay": {warns, ""}, "replica-priority": {warns, ""}, "acllog-max-len": {warns, ""},
	"lazyfree-lazy-eviction": {warns, ""}, "lazyfree-lazy-expire": {warns, ""}, "lazyfree-lazy-server-del": {warns, ""},
	"replica-lazy-flush": {warns, ""}, "lazyfree-lazy-user-del": {warns, ""}, "lazyfree-lazy-user-flush": {warns, ""},
	"oom-score-adj-values": {warns, ""}, "disable-thp": {warns, ""}, "appendonly": {warns, ""}, "appendfilename": {warns, ""},
	"appenddirname": {warns, ""}, "no-appendfsync-on-rewrite": {warns, ""}, "auto-aof-rewrite-percentage": {warns, ""},
	"auto-aof-rewrite-min-size": {warns, ""}, "aof-use-rdb-preamble": {warns, ""}, "aof-timestamp-enabled": {warns, ""},
	"hash-max-listpack-entries": {warns, ""}, "hash-max-listpack-value": {warns, ""}, "list-max-listpack-size": {warns, ""},
	"list-compress-depth": {warns, ""}, "set-max-intset-entries": {warns, ""}, "zset-max-listpack-entries": {warns, ""},
	"zset-max-listpack-value": {warns, ""}, "hll-sparse-max-bytes": {warns, ""}, "stream-node-max-bytes": {warns, ""},
	"stream-node-max-entries": {warns, ""}, "activerehashing": {warns, ""}, "hz": {warns, ""}, "dynamic-hz": {warns, ""},
	"aof-rewrite-incremental-fsync": {warns, ""}, "rdb-save-incremental-fsync": {warns, ""}, "jemalloc-bg-thread": {warns, ""},
}

// A directiveLine is a line of a config file that is not blank or a
// comment.
type directiveLine struct {
	n    int
	text string
	name string
}

// directiveLines are the directive lines of a config file, in order.
func directiveLines(t *testing.T, path string) []directiveLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []directiveLine
	for i, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			args, _ := resp.SplitArgs(line)
			lines = append(lines, directiveLine{i + 1, line, strings.ToLower(args[0])})
		}
	}
	return lines
}

// TestConfigFile_DebianDirectives reads each line of Debian's redis.conf
// alone and checks it does what debianDirectives says: sets its flag and
// nothing else, warns once naming the line, or passes silently. A
// directive of the file that the table lacks fails the test. Then it reads
// the whole file, and each flag shows the value the table gives.
func TestConfigFile_DebianDirectives(t *testing.T) {
	if _, err := os.Stat(debianConf); err != nil {
		t.Skipf("%s: %v (apt-get install redis-server)", debianConf, err)
	}
	path := filepath.Join(t.TempDir(), "one.conf")
	for _, line := range directiveLines(t, debianConf) {
		want, ok := debianDirectives[line.name]
		if !ok {
			t.Errorf("line %d, %q: not in debianDirectives", line.n, line.text)
			continue
		}
		writeFile(t, path, line.text+"\n")
		fs, _ := newFlags(&bytes.Buffer{})
		warnings, err := applyConfigFile(fs, path, nil)
		if err != nil {
			t.Errorf("line %d: %v", line.n, err)
			continue
		}
		var set []string
		fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
		switch want.outcome {
		case setsFlag:
			if len(warnings) != 0 || !slices.Equal(set, []string{line.name}) {
				t.Errorf("line %d, %q: flags set %q, warnings %v; want %s alone", line.n, line.text, set, warnings, line.name)
			}
		case warns:
			if len(set) != 0 || len(warnings) != 1 || warnings[0].line != 1 || warnings[0].text != line.text || warnings[0].instead == "" {
				t.Errorf("line %d, %q: flags set %q, warnings %+v; want one warning", line.n, line.text, set, warnings)
			}
		case silent:
			if len(set) != 0 || len(warnings) != 0 {
				t.Errorf("line %d, %q: flags set %q, warnings %+v; want neither", line.n, line.text, set, warnings)
			}
		}
	}
	fs, s := newFlags(&bytes.Buffer{})
	if _, err := applyConfigFile(fs, debianConf, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range debianDirectives {
		if got := fs.Lookup(name); want.outcome == setsFlag && got.Value.String() != want.value {
			t.Errorf("%s = %q after the whole file, want %q", name, got.Value.String(), want.value)
		}
	}
	if s.logLevel.level != slog.LevelInfo {
		t.Errorf("loglevel notice: level %v, want info", s.logLevel.level)
	}
}

// TestRun_DebianRedisConf starts the real binary on Debian's stock
// redis.conf, as installed. Only what belongs to the redis-server package
// is given on the command line (which wins over the file): its port, data
// folder, log file and PID file. It serves, with loglevel notice as info,
// and logs one warning for each line debianDirectives says warns.
func TestRun_DebianRedisConf(t *testing.T) {
	if _, err := os.Stat(debianConf); err != nil {
		t.Skipf("%s: %v (apt-get install redis-server)", debianConf, err)
	}
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "throttled.pid")
	p, addr := startBinary(t, "--config", debianConf, "--dir", filepath.Join(dir, "data"), "--logfile", "", "--pidfile", pidfile)
	ctx := context.Background()
	c, err := respconn.Dial(ctx, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.Do("CONFIG", "GET", "databases"); err != nil || fmt.Sprint(got) != "[databases 16]" {
		t.Errorf("CONFIG GET databases: %v, %v", got, err)
	}
	if pid, err := os.ReadFile(pidfile); err != nil || string(pid) != strconv.Itoa(p.Pid())+"\n" {
		t.Errorf("pidfile: %q, %v; want %d", pid, err, p.Pid())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Errorf("the pidfile is still there after the shutdown (%v)", err)
	}
	var want []string
	for _, line := range directiveLines(t, debianConf) {
		if debianDirectives[line.name].outcome == warns {
			want = append(want, fmt.Sprintf("line=%d ", line.n))
		}
	}
	var warned []string
	for _, line := range strings.Split(p.Output(), "\n") {
		if strings.Contains(line, "level=WARN") {
			_, at, _ := strings.Cut(line, " line=")
			n, _, _ := strings.Cut(at, " ")
			warned = append(warned, "line="+n+" ")
		} else if strings.Contains(line, "level=ERROR") {
			t.Errorf("error logged: %s", line)
		}
	}
	slices.Sort(want)
	slices.Sort(warned)
	if !slices.Equal(warned, want) {
		t.Errorf("warned for %q, want %q\n%s", warned, want, p.Output())
	}
}

// TestRun_ConfigErrorsAsRedis gives redis-server and throttled the same
// bad lines: both stop, and throttled's report is redis-server's with the
// file named, its own name in the banner and exit status 78 (refused
// settings) where Redis exits 1.
func TestRun_ConfigErrorsAsRedis(t *testing.T) {
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	path := filepath.Join(t.TempDir(), "bad.conf")
	for _, bad := range []string{
		"nosuch 1", "dir", "logfile", "include", "port abc", "port 1 2", `bind "127.0.0.1`, `requirepass "a"b`,
		"maxmemory 1tbx", "appendfsync sometimes", "protected-mode maybe", "databases", "tcp-keepalive",
	} {
		// port 0 first: a line Redis took would leave it nowhere to
		// listen, so it would exit rather than serve.
		writeFile(t, path, "port 0\n"+bad+"\n")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, redis, path).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("redis-server on %q: %v\n%s", bad, err, out)
		}
		want := strings.Split(string(out), "\n")
		status, stdout, stderr := runBinary(t, "--config", path)
		got := strings.Split(stderr, "\n")
		if status != exitRefused || stdout != "" || len(got) != len(want) {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nredis-server:\n%s", bad, status, stdout, stderr, out)
			continue
		}
		if got[1] != "*** FATAL CONFIG FILE ERROR (throttled "+commands.Version+", Redis 7.0.15) ***" || want[1] != "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***" {
			t.Errorf("%q: banner %q, redis-server's %q", bad, got[1], want[1])
		}
		got[2] = strings.Replace(got[2], " file "+path+",", " file,", 1)
		if got[0] != want[0] || !slices.Equal(got[2:], want[2:]) {
			t.Errorf("%q: throttled said\n%s\nredis-server\n%s", bad, stderr, out)
		}
	}
}

// TestConfigFile_Include: include reads a file in place, as Redis does: a
// path relative to the working directory, later lines winning, a pattern
// reading its files in name order (none matching: nothing), an error
// inside naming the included file and its line, and a file that includes
// itself, however indirectly, refused at the line that closes the cycle.
func TestConfigFile_Include(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("conf.d", 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, "base.conf", "port 2222\ndatabases 4\n")
	writeFile(t, "conf.d/b.conf", "timeout 20\n")
	writeFile(t, "conf.d/a.conf", "timeout 10\nmaxclients 7\n")
	writeFile(t, "main.conf", "port 1111\ninclude base.conf\ninclude conf.d/*.conf\ninclude none.d/*.conf\nport 3333\n")
	fs, s := newFlags(&bytes.Buffer{})
	if _, err := applyConfigFile(fs, "main.conf", nil); err != nil {
		t.Fatal(err)
	}
	if s.Port != 3333 || s.Databases != 4 || s.clients.Timeout != 20*time.Second || s.clients.MaxClients != 7 {
		t.Errorf("port %d, databases %d, timeout %v, maxclients %d; want 3333, 4, 20s, 7", s.Port, s.Databases, s.clients.Timeout, s.clients.MaxClients)
	}
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"main.conf": "port 1\ninclude bad.conf\n", "bad.conf": "\n\nnosuch 1\n"},
			"bad.conf:3: 'nosuch 1': Bad directive or wrong number of arguments"},
		{map[string]string{"main.conf": "include main.conf\n"},
			"main.conf:1: 'include main.conf': include cycle: main.conf includes main.conf"},
		{map[string]string{"main.conf": "include a.conf\n", "a.conf": "port 1\ninclude " + filepath.Join(dir, "main.conf") + "\n"},
			"a.conf:2: 'include " + filepath.Join(dir, "main.conf") + "': include cycle: main.conf includes a.conf includes " + filepath.Join(dir, "main.conf")},
		{map[string]string{"main.conf": "include missing.conf\n"},
			"main.conf:1: 'include missing.conf': can't open config file 'missing.conf': no such file or directory"},
	} {
		for name, text := range tc.files {
			writeFile(t, name, text)
		}
		fs, _ := newFlags(&bytes.Buffer{})
		var le *configLineError
		if _, err := applyConfigFile(fs, "main.conf", nil); !errors.As(err, &le) || err.Error() != tc.want {
			t.Errorf("%v: got %v, want %s", tc.files, err, tc.want)
		}
	}
}

// TestConfigFile_RedisDirectives: Redis' directives that throttled cannot
// honour without going against what they ask are refused with what to do
// instead; with the values that ask for what throttled does, they pass.
func TestConfigFile_RedisDirectives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.conf")
	for _, tc := range []struct {
		line  string
		want  string // the error; "": accepted, with warns warnings
		warns int
	}{
		{"replicaof 10.0.0.1 6379", "replicaof is not supported: throttled cannot replicate from a Redis primary", 0},
		{"rename-command CONFIG \"\"", "rename-command is not supported: take commands away with ACL rules", 0},
		{"unixsocket /run/redis.sock", "unixsocket is not supported: throttled listens on TCP only", 0},
		{"tls-protocols TLSv1.3", "tls-protocols is not supported: throttled speaks TLS 1.2 and 1.3", 0},
		{"tls-ciphersuites TLS_CHACHA20_POLY1305_SHA256", "tls-ciphersuites is not supported", 0},
		{"cluster-enabled yes", "cluster-enabled is not supported", 0},
		{"loadmodule /usr/lib/redis/modules/redis_cell.so", "loadmodule is not supported: throttled loads no modules (redis-cell's CL.THROTTLE is built in)", 0},
		{"user alice on >pw ~* +@all", "user is not supported: put users in the aclfile", 0},
		{"daemonize", "wrong number of arguments", 0},
		{"config other.conf", "config is a command-line flag: include reads another file", 0},
		{"version yes", "Bad directive or wrong number of arguments", 0},
		{"maxmemory-samples 5 6", "", 1},
		{"cluster-enabled no", "", 0},
		{`tls-protocols "TLSv1.2 TLSv1.3"`, "", 0},
		{"DAEMONIZE No", "", 0},
		{`save ""`, "", 0},
		{"appendonly yes", "", 0},
	} {
		writeFile(t, path, "# a comment\n"+tc.line+"\n")
		fs, _ := newFlags(&bytes.Buffer{})
		warnings, err := applyConfigFile(fs, path, nil)
		var le *configLineError
		switch {
		case tc.want == "" && (err != nil || len(warnings) != tc.warns):
			t.Errorf("%q: %v, %v; want it accepted with %d warnings", tc.line, err, warnings, tc.warns)
		case tc.want != "" && (!errors.As(err, &le) || le.line != 2 || !strings.HasPrefix(le.reason, tc.want)):
			t.Errorf("%q: %v; want line 2: %s", tc.line, err, tc.want)
		}
	}
}

// TestConfigFile_EveryRedisParameter: every parameter a real redis-server
// 7.0.15 lists in CONFIG GET * is something throttled reads: a flag, or
// one of redisDirectives (accepted, warned about or refused), never a
// bad directive; and no directive shadows a flag.
func TestConfigFile_EveryRedisParameter(t *testing.T) {
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := proc.Start(ctx, proc.Config{Name: "redis-server", Path: redis, Addr: proc.Addr(port), Timeout: 10 * time.Second,
		Args: []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	c, err := respconn.Dial(ctx, p.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reply, err := c.Do("CONFIG", "GET", "*")
	pairs, _ := reply.([]any)
	if err != nil || len(pairs) < 300 {
		t.Fatalf("CONFIG GET *: %d values, %v", len(pairs), err)
	}
	fs, _ := newFlags(&bytes.Buffer{})
	for i := 0; i < len(pairs); i += 2 {
		name := pairs[i].(string)
		_, directive := redisDirectives[name]
		isFlag := fs.Lookup(name) != nil
		if !isFlag && !directive {
			t.Errorf("redis-server's %s is neither a flag nor in redisDirectives", name)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := redisDirectives[f.Name]; ok {
			t.Errorf("%s is both a flag and in redisDirectives", f.Name)
		}
	})
}

// TestRun_LogfilePidfileLoglevel runs the real binary with Redis' logging
// lines: the log goes to logfile (nothing to stderr), opened for each line
// so that a rotated file is started anew; pidfile holds the pid while it
// runs; loglevel notice logs the info lines, and daemonize yes warns that
// it runs in the foreground.
func TestRun_LogfilePidfileLoglevel(t *testing.T) {
	dir := t.TempDir()
	logfile, pidfile, conf := filepath.Join(dir, "t.log"), filepath.Join(dir, "t.pid"), filepath.Join(dir, "t.conf")
	writeFile(t, conf, fmt.Sprintf("daemonize yes\nlogfile %q\npidfile %s\nloglevel notice\ndir %s\n", logfile, pidfile, filepath.Join(dir, "data")))
	p, _ := startBinary(t, "--config", conf)
	if pid, err := os.ReadFile(pidfile); err != nil || string(pid) != strconv.Itoa(p.Pid())+"\n" {
		t.Errorf("pidfile: %q, %v; want %d", pid, err, p.Pid())
	}
	before, err := os.ReadFile(logfile)
	if err != nil || !strings.Contains(string(before), "level=WARN") || !strings.Contains(string(before), `directive="daemonize yes"`) ||
		!strings.Contains(string(before), "msg=listening") {
		t.Fatalf("log file (%v):\n%s", err, before)
	}
	if err := os.Rename(logfile, logfile+".1"); err != nil { // as logrotate does
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(logfile)
	if err != nil || !strings.Contains(string(after), "shutting down") || strings.Contains(string(after), "listening") {
		t.Errorf("log file after the rotation (%v):\n%s", err, after)
	}
	if p.Output() != "" {
		t.Errorf("stderr: %q, want nothing (the log goes to the file)", p.Output())
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Errorf("pidfile still there after the shutdown (%v)", err)
	}
	if status, _, stderr := runBinary(t, "--logfile", filepath.Join(dir, "no", "such", "dir.log"), "--persistence", "off", "--port", "0"); status != exitRefused ||
		!strings.Contains(stderr, "can't open the log file") {
		t.Errorf("a log file that cannot be opened: exit %d, %s", status, stderr)
	}
}

// TestLogLevel: Redis' words and slog's give the same levels; nothing
// logs nothing.
func TestLogLevel(t *testing.T) {
	for word, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "verbose": slog.LevelDebug, "info": slog.LevelInfo, "notice": slog.LevelInfo,
		"NOTICE": slog.LevelInfo, "warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError,
	} {
		var f logLevelFlag
		if err := f.Set(word); err != nil || f.level != want {
			t.Errorf("%s: %v, %v; want %v", word, f.level, err, want)
		}
	}
	var f logLevelFlag
	if err := f.Set("nothing"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	l, err := newLogger("", f.level, &out)
	if err != nil {
		t.Fatal(err)
	}
	l.Error("not to be seen")
	if out.Len() != 0 {
		t.Errorf("loglevel nothing logged %q", out.String())
	}
	if err := f.Set("loud"); err == nil {
		t.Error("loglevel loud: no error")
	}
}

// raftVariant is examples/systemd/throttled.conf made a Raft member as its
// comment says: the commented-out lines after "# A Raft member" are
// uncommented, less the ones leave names.
func raftVariant(t *testing.T, example string, leave ...string) string {
	t.Helper()
	lines := strings.Split(example, "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "# A Raft member") })
	if at < 0 {
		t.Fatal("throttled.conf has no \"# A Raft member\" block")
	}
	var out []string
	for i, l := range lines {
		if i > at && len(l) > 1 && l[0] == '#' && l[1] >= 'a' && l[1] <= 'z' {
			if name, _, _ := strings.Cut(l[1:], " "); slices.Contains(leave, name) {
				continue
			}
			l = l[1:]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestRun_ExampleSystemdConf starts the real binary on
// examples/systemd/throttled.conf, then on its Raft variant as the file
// documents it (which elects itself and takes a write), with the host's
// addresses and folder on the command line, as another host would have
// its own. Without the variant's maxmemory 0 the member is refused with
// exit status 78, which the unit does not restart.
func TestRun_ExampleSystemdConf(t *testing.T) {
	const path = "../../examples/systemd/throttled.conf"
	example, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	local := []string{"--metrics-addr", "127.0.0.1:0"}
	check := func(p *proc.Process, addr string, want map[string]string) {
		t.Helper()
		c, err := respconn.Dial(context.Background(), addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for name, v := range want {
			if got, err := c.Do("CONFIG", "GET", name); err != nil || fmt.Sprint(got) != "["+name+" "+v+"]" {
				t.Errorf("CONFIG GET %s: %v, %v; want %s", name, got, err, v)
			}
		}
		// A Raft member answers a write once it leads: wait for the election.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, err := c.Do("SET", "k", "v")
			if err == nil && got == "OK" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("SET: %v, %v\n%s", got, err, p.Output())
			}
		}
		if err := p.Stop(); err != nil {
			t.Fatalf("%v\n%s", err, p.Output())
		}
		if strings.Contains(p.Output(), `msg="config:`) || strings.Contains(p.Output(), "level=ERROR") {
			t.Errorf("config warnings or errors logged:\n%s", p.Output())
		}
	}

	p, addr := startBinary(t, append(local, "--config", path, "--dir", filepath.Join(dir, "single"))...)
	check(p, addr, map[string]string{"maxmemory": "1073741824", "appendfsync": "everysec", "replication": "none"})

	raftConf := filepath.Join(dir, "raft.conf")
	writeFile(t, raftConf, raftVariant(t, string(example)))
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cluster := proc.Addr(port)
	member := append(local, "--config", raftConf, "--dir", filepath.Join(dir, "raft"), "--bind", "127.0.0.1",
		"--cluster-addr", cluster, "--peers", "n1="+cluster)
	p, addr = startBinary(t, member...)
	check(p, addr, map[string]string{"maxmemory": "0", "replication": "raft"})

	writeFile(t, raftConf, raftVariant(t, string(example), "maxmemory"))
	// Refused before it listens: the free port is for the case it did not.
	if port, err = proc.FreePort(); err != nil {
		t.Fatal(err)
	}
	status, _, stderr := runBinary(t, append(member, "--dir", filepath.Join(dir, "raft2"), "--port", strconv.Itoa(port))...)
	if status != exitRefused || !strings.Contains(stderr, "--maxmemory cannot be used with --replication raft") {
		t.Errorf("the Raft lines with maxmemory 1gb: exit %d, %s", status, stderr)
	}
}

// TestRedisDirectivesDocumented: every directive of redisDirectives has
// its place in docs/configuration.md's tables.
func TestRedisDirectivesDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range redisDirectives {
		if !bytes.Contains(page, []byte("`"+name+"`")) && !bytes.Contains(page, []byte("`"+name+" ")) {
			t.Errorf("docs/configuration.md does not name %s", name)
		}
	}
}
