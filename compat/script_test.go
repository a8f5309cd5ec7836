package compat

// Script format. A script is a sequence of blocks separated by blank lines.
// Lines starting with '#' between blocks are comments; two of them are
// options:
//
//	# target: both|throttled|redis   which servers run the script (required)
//	# requirepass: secret            start the servers with this password
//
// A block is a command line, "----", and the expected reply:
//
//	SET k "hello world"
//	----
//	+OK
//
// Command lines are split like redis-cli: blanks separate arguments, "..."
// takes Go escapes (\n, \r, \t, \", \\, \xHH), '...' is taken literally.
// A reply is written one RESP element per line, children indented by two
// spaces under their header:
//
//	+OK        simple string          -ERR ...    error, verbatim
//	:1         integer                "abc"       bulk string, Go-quoted
//	$-1        null bulk string       *-1         null array
//	*2 %2 ~2 >2  array, map of 2 pairs, set, push: children follow
//	_          RESP3 null             ,1.5 #t (7  double, boolean, big number
//	="txt:.."  verbatim string, Go-quoted
//
// An expected line may use <int> (digits, maybe a '-') and <any> (any text)
// where the value is not for us to pin down: ids, TIME, COMMAND COUNT.
//
// Other blocks start with a lower-case word that is not a Redis command:
//
//	conn NAME        switch to connection NAME, opened on first use (the
//	                 first one is "main")
//	clock set NS     DEBUG CLOCK SET NS, on a side connection (throttled)
//	clock advance D  DEBUG CLOCK ADVANCE D; D is ns, or 1500ms, 2s, 1us...
//	pipeline         the command lines up to "----" go out in one write;
//	                 their replies follow "----", in order
//	sorted CMD       CMD, with the elements of its array reply sorted (the
//	                 order of KEYS is not part of the contract)
//	scanall ARGS     SCAN 0 ARGS, then SCAN with each returned cursor until
//	                 it is 0; the output is the sorted union of the keys, as
//	                 an array (an error reply is shown as it is)
//	raw "BYTES"      the Go-quoted BYTES (more quoted lines may follow up to
//	                 "----") are sent as they are on the current connection;
//	                 expected: the Go-quoted bytes that came back, then
//	                 "open" or "closed". A closed connection is opened anew
//	                 on its next use (so QUIT belongs in a raw block).
//
// Each script runs on a fresh server per target. throttled runs with its
// debug clock, which stands still unless a clock block moves it; "both"
// scripts must also pass on redis-server's real clock.
//
// `go test ./compat -rewrite` replaces the expected output of every block
// that differs with what the reference target answered: redis-server for
// "both" and "redis" scripts, throttled for "throttled" scripts.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testcert"
	"github.com/throttleddb/throttled/replication/crdt/crdttest"
	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite expected outputs in testdata from the reference target")

const (
	replyTimeout = 5 * time.Second
	// rawQuiet is how long a raw block waits for more bytes before it
	// decides the reply is complete and the connection still open.
	rawQuiet = 100 * time.Millisecond
)

func TestScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			targets := []string{parseScript(t, path).target}
			if targets[0] == "both" {
				// Redis first: with -rewrite it fixes the expectations
				// that throttled is then checked against.
				targets = []string{"redis", "throttled"}
			}
			if parseScript(t, path).raft {
				targets = append(targets, "raft")
			}
			if parseScript(t, path).crdt {
				targets = append(targets, "crdt")
			}
			if slices.Contains(targets, "throttled") {
				// Every command must answer over TLS as over TCP.
				targets = append(targets, "tls")
			}
			for _, target := range targets {
				t.Run(target, func(t *testing.T) { runScript(t, path, target) })
			}
		})
	}
}

type script struct {
	path   string
	lines  []string
	target string // both, throttled or redis
	pass   string // requirepass
	raft   bool   // "# raft: yes": also run on a Raft follower
	crdt   bool   // "# crdt: yes": also run on a one-node CRDT mesh
	blocks []*block
}

type block struct {
	line     int      // 1-based line of the head
	head     string   // a command line or a directive
	body     []string // lines between the head and "----"
	want     []string // expected output, lines[from:to]
	from, to int
}

func parseScript(t *testing.T, path string) *script {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &script{path: path, lines: strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")}
	blank := func(i int) bool { return i >= len(s.lines) || strings.TrimSpace(s.lines[i]) == "" }
	for i := 0; i < len(s.lines); i++ {
		l := s.lines[i]
		if blank(i) {
			continue
		}
		if strings.HasPrefix(l, "#") {
			k, v, _ := strings.Cut(l[1:], ":")
			switch strings.TrimSpace(k) {
			case "target":
				s.target = strings.TrimSpace(v)
			case "requirepass":
				s.pass = strings.TrimSpace(v)
			case "raft":
				s.raft = strings.TrimSpace(v) == "yes"
			case "crdt":
				s.crdt = strings.TrimSpace(v) == "yes"
			}
			continue
		}
		b := &block{line: i + 1, head: l, from: -1, to: -1}
		s.blocks = append(s.blocks, b)
		if w := firstWord(l); w == "conn" || w == "clock" {
			continue // directives have no output
		}
		for i++; !blank(i) && s.lines[i] != "----"; i++ {
			b.body = append(b.body, s.lines[i])
		}
		if blank(i) {
			t.Fatalf("%s:%d: block has no ---- line", path, b.line)
		}
		b.from = i + 1
		for i++; !blank(i); i++ {
		}
		b.to = i
		b.want = s.lines[b.from:b.to]
	}
	switch s.target {
	case "both", "throttled", "redis":
	default:
		t.Fatalf("%s: want a \"# target: both|throttled|redis\" line, got %q", path, s.target)
	}
	return s
}

func firstWord(l string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(l), " ")
	return w
}

// runScript runs path's blocks against a fresh server of the given target.
func runScript(t *testing.T, path, target string) {
	s := parseScript(t, path)
	r := &runner{t: t, s: s, conns: map[string]*conn{}, cur: "main"}
	switch target {
	case "redis":
		r.addr = startRedis(t, s.pass)
	case "raft":
		// A follower of a 3-member Raft cluster: every command goes
		// through the log and the leader, and must answer as one node.
		r.addr = rafttest.New(t, 3, server.Config{RequirePass: s.pass}).Follower().Node.Addr()
	case "crdt":
		// A mesh node without peers: its states are mergeable ones, and
		// it must answer as one node.
		r.addr = servertest.Start(t, server.Config{DebugClock: true, RequirePass: s.pass, CRDT: &server.CRDTConfig{
			NodeID: "a", Transport: crdttest.NewNet(1).Transport("a")}}).Addr()
	case "tls":
		certs := testcert.Make(t)
		r.addr = servertest.Start(t, server.Config{DebugClock: true, RequirePass: s.pass, TLSCertFile: certs.ServerCert,
			TLSKeyFile: certs.ServerKey, TLSCACertFile: certs.CACert}).TLSAddr()
		r.tls = certs.Client()
	default:
		r.addr = servertest.Start(t, server.Config{DebugClock: true, RequirePass: s.pass}).Addr()
	}
	t.Cleanup(r.close)
	reference := target == "redis" || s.target == "throttled"
	changed := false
	for _, b := range s.blocks {
		got := r.run(b)
		if b.from < 0 || match(b.want, got) {
			continue
		}
		if *rewrite && reference {
			b.want, changed = got, true
			continue
		}
		t.Errorf("%s:%d: %s\nwant:\n\t%s\ngot:\n\t%s", path, b.line, strings.Join(append([]string{b.head}, b.body...), "\n\t"),
			strings.Join(b.want, "\n\t"), strings.Join(got, "\n\t"))
	}
	if changed {
		var out []string
		last := 0
		for _, b := range s.blocks {
			if b.from >= 0 {
				out = append(append(out, s.lines[last:b.from]...), b.want...)
				last = b.to
			}
		}
		out = append(out, s.lines[last:]...)
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: rewrote expected output from %s", path, target)
	}
}

// match reports whether got is want, with <int> and <any> in want matching
// an integer and any text.
func match(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i, w := range want {
		if w == got[i] {
			continue
		}
		if !strings.Contains(w, "<int>") && !strings.Contains(w, "<any>") {
			return false
		}
		re := strings.NewReplacer("<int>", "-?[0-9]+", "<any>", ".*").Replace(regexp.QuoteMeta(w))
		if !regexp.MustCompile("^" + re + "$").MatchString(got[i]) {
			return false
		}
	}
	return true
}

type runner struct {
	t     *testing.T
	s     *script
	addr  string
	tls   *tls.Config // nil: plain TCP
	conns map[string]*conn
	cur   string
	clock *conn // DEBUG CLOCK goes here, outside any MULTI of the script
}

type conn struct {
	nc net.Conn
	r  *bufio.Reader
}

func (r *runner) close() {
	for _, c := range r.conns {
		c.nc.Close()
	}
	if r.clock != nil {
		r.clock.nc.Close()
	}
}

func (r *runner) dial(b *block) *conn {
	d := &net.Dialer{Timeout: replyTimeout}
	var nc net.Conn
	var err error
	if r.tls != nil {
		nc, err = tls.DialWithDialer(d, "tcp", r.addr, r.tls)
	} else {
		nc, err = d.Dial("tcp", r.addr)
	}
	if err != nil {
		r.fatal(b, "dial: %v", err)
	}
	return &conn{nc: nc, r: bufio.NewReader(nc)}
}

func (r *runner) fatal(b *block, format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s:%d: %s: %s", r.s.path, b.line, b.head, fmt.Sprintf(format, args...))
}

// run executes one block and returns its output (nil for directives).
func (r *runner) run(b *block) []string {
	word, rest, _ := strings.Cut(strings.TrimSpace(b.head), " ")
	switch word {
	case "conn":
		r.cur = strings.TrimSpace(rest)
		return nil
	case "clock":
		r.runClock(b, strings.Fields(rest))
		return nil
	case "raw":
		var data []byte
		for _, q := range append([]string{rest}, b.body...) {
			s, err := strconv.Unquote(strings.TrimSpace(q))
			if err != nil {
				r.fatal(b, "raw bytes must be Go-quoted: %s", q)
			}
			data = append(data, s...)
		}
		// Wait for as many bytes as expected, so a slow server is not
		// mistaken for a short reply.
		want := ""
		if len(b.want) > 0 {
			want, _ = strconv.Unquote(b.want[0])
		}
		c := r.conn(b)
		r.send(b, c, data)
		out, closed := c.readRaw(len(want))
		if closed {
			c.nc.Close()
			delete(r.conns, r.cur)
			return []string{strconv.Quote(string(out)), "closed"}
		}
		return []string{strconv.Quote(string(out)), "open"}
	}
	if len(b.body) > 0 && word != "pipeline" {
		r.fatal(b, "a command is followed by ----")
	}
	switch word {
	case "pipeline":
		return r.commands(b, b.body...)
	case "sorted":
		got := r.commands(b, rest)
		if len(got) > 0 && strings.HasPrefix(got[0], "*") {
			for _, l := range got[1:] {
				if strings.HasPrefix(l, "    ") {
					r.fatal(b, "sorted takes a flat array, got %q", got)
				}
			}
			slices.Sort(got[1:])
		}
		return got
	case "scanall":
		return r.scanAll(b, rest)
	}
	return r.commands(b, b.head)
}

// commands sends the command lines in one write and returns their replies.
func (r *runner) commands(b *block, lines ...string) []string {
	var data []byte
	for _, line := range lines {
		args, err := splitArgs(line)
		if err != nil || len(args) == 0 {
			r.fatal(b, "bad command line %q: %v", line, err)
		}
		data = resp.AppendCommand(data, args...)
	}
	c := r.conn(b)
	r.send(b, c, data)
	var got []string
	for range lines {
		var err error
		c.nc.SetReadDeadline(time.Now().Add(replyTimeout))
		if got, err = readReply(c.r, "", got); err != nil {
			r.fatal(b, "reading reply: %v (so far: %q)", err, got)
		}
	}
	return got
}

// scanAll runs SCAN cursor args from cursor 0 until the cursor is 0 again and
// returns the sorted union of the keys it returned, as an array. An error
// reply is returned as it is.
func (r *runner) scanAll(b *block, args string) []string {
	cursor := "0"
	seen := map[string]bool{}
	for i := 0; ; i++ {
		got := r.commands(b, "SCAN "+cursor+" "+args)
		if strings.HasPrefix(got[0], "-") {
			return got
		}
		if len(got) < 3 || got[0] != "*2" || !strings.HasPrefix(got[2], "  *") {
			r.fatal(b, "SCAN %s replied %q", cursor, got)
		}
		for _, k := range got[3:] {
			seen[k[2:]] = true // keep the indent of one level
		}
		cursor, _ = strconv.Unquote(strings.TrimSpace(got[1]))
		if cursor == "0" {
			break
		}
		if i > 10000 {
			r.fatal(b, "SCAN does not end")
		}
	}
	keys := slices.Sorted(maps.Keys(seen))
	return append([]string{"*" + strconv.Itoa(len(keys))}, keys...)
}

func (r *runner) conn(b *block) *conn {
	c := r.conns[r.cur]
	if c == nil {
		c = r.dial(b)
		r.conns[r.cur] = c
	}
	return c
}

func (r *runner) send(b *block, c *conn, data []byte) {
	c.nc.SetWriteDeadline(time.Now().Add(replyTimeout))
	if _, err := c.nc.Write(data); err != nil {
		r.fatal(b, "write: %v", err)
	}
}

// runClock moves throttled's debug clock: clock set NS | clock advance D.
func (r *runner) runClock(b *block, f []string) {
	if len(f) != 2 || (f[0] != "set" && f[0] != "advance") {
		r.fatal(b, "want clock set NS or clock advance D")
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		d, derr := time.ParseDuration(f[1])
		if derr != nil {
			r.fatal(b, "bad time %q", f[1])
		}
		n = int64(d)
	}
	if r.clock == nil {
		r.clock = r.dial(b)
		if r.s.pass != "" {
			r.clockCommand(b, "AUTH", r.s.pass)
		}
	}
	got := r.clockCommand(b, "DEBUG", "CLOCK", strings.ToUpper(f[0]), strconv.FormatInt(n, 10))
	if !match([]string{":<int>"}, got) {
		r.fatal(b, "got %q", got)
	}
}

func (r *runner) clockCommand(b *block, args ...string) []string {
	r.send(b, r.clock, resp.AppendCommand(nil, args...))
	r.clock.nc.SetReadDeadline(time.Now().Add(replyTimeout))
	got, err := readReply(r.clock.r, "", nil)
	if err != nil {
		r.fatal(b, "%v", err)
	}
	return got
}

// readRaw returns the bytes that arrive until the peer closes the connection
// (closed true), or stays quiet for rawQuiet once at least n bytes came.
func (c *conn) readRaw(n int) (out []byte, closed bool) {
	buf := make([]byte, 4096)
	end := time.Now().Add(replyTimeout)
	for {
		d := end
		if q := time.Now().Add(rawQuiet); len(out) >= n && q.Before(end) {
			d = q
		}
		c.nc.SetReadDeadline(d)
		k, err := c.r.Read(buf)
		out = append(out, buf[:k]...)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return out, false
		case err != nil:
			return out, true // EOF, or reset
		}
	}
}

// readReply reads one RESP2/RESP3 reply and appends its rendering to out,
// one line per element, children indented under their header.
func readReply(r *bufio.Reader, indent string, out []string) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return out, err
	}
	line, ok := strings.CutSuffix(line, "\r\n")
	if !ok || line == "" {
		return out, fmt.Errorf("malformed reply line %q", line)
	}
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return append(out, indent+line), nil
	case '$', '=':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return append(out, indent+line), err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return out, err
		}
		q := strconv.Quote(string(buf[:n]))
		if line[0] == '=' {
			q = "=" + q
		}
		return append(out, indent+q), nil
	case '*', '%', '~', '>', '|':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return out, fmt.Errorf("bad aggregate header %q", line)
		}
		out = append(out, indent+line)
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if out, err = readReply(r, indent+"  ", out); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return out, fmt.Errorf("unknown reply type %q", line)
}

// splitArgs splits a command line as redis-cli does: blanks separate
// arguments, "..." takes Go escapes and '...' is literal.
func splitArgs(line string) ([]string, error) {
	var args []string
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return args, nil
		}
		var arg []byte
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			q := line[i]
			if q != '"' && q != '\'' {
				arg = append(arg, q)
				i++
				continue
			}
			j := i + 1
			for ; j < len(line) && line[j] != q; j++ {
				if q == '"' && line[j] == '\\' {
					j++
				}
			}
			if j >= len(line) {
				return nil, errors.New("unbalanced quotes")
			}
			if q == '\'' {
				arg = append(arg, line[i+1:j]...)
			} else {
				s, err := strconv.Unquote(line[i : j+1])
				if err != nil {
					return nil, err
				}
				arg = append(arg, s...)
			}
			i = j + 1
		}
		args = append(args, string(arg))
	}
}

// startRedis runs a real redis-server for the test on a free port and
// returns its address. It skips the test when redis-server is missing.
// DEBUG is enabled (Redis 7 refuses it by default), so scripts can check
// DEBUG DIGEST's replies against it. extra are more redis-server options.
func startRedis(t *testing.T, pass string, extra ...string) string {
	return startRedisProc(t, pass, extra...).Addr
}

// startRedisProc is startRedis, returning the process.
func startRedisProc(t *testing.T, pass string, extra ...string) *proc.Process {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed; the reference target is skipped")
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--enable-debug-command", "local"}
	if pass != "" {
		args = append(args, "--requirepass", pass)
	}
	args = append(args, extra...)
	p, err := proc.Start(context.Background(), proc.Config{
		Name: "redis-server", Path: bin, Args: args, Addr: proc.Addr(port), Dir: t.TempDir(), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}
