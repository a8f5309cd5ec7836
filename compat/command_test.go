package compat

import (
	"bufio"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// The command table's Redis half: commands/redis_command_info.txt and
// commands/redis_command_docs.txt hold redis-server 7.0.15's COMMAND INFO
// and COMMAND DOCS replies (RESP3, in the scripts' reply format) for each
// command throttled has that Redis has. throttled answers COMMAND from them.

const (
	infoFixture = "../commands/redis_command_info.txt"
	docsFixture = "../commands/redis_command_docs.txt"
)

// TestCommandTable_Fixtures regenerates the fixtures from a live
// redis-server and fails when they differ from the checked-in ones
// (-rewrite writes them).
func TestCommandTable_Fixtures(t *testing.T) {
	rd := startRedis(t, "")
	th := servertest.Start(t, server.Config{}).Addr()
	var info, docs []string
	for _, name := range commandNames(t, th) {
		if strings.Contains(name, "|") {
			continue
		}
		if r := ask(t, rd, 3, "COMMAND", "INFO", name); r[1] != "  _" {
			info = append(info, unindent(sortedSubs(r))[1:]...)
		}
		if r := ask(t, rd, 3, "COMMAND", "DOCS", name); r[0] != "%0" {
			docs = append(docs, unindent(sortedSubs(r))[1:]...)
		}
	}
	checkFixture(t, infoFixture, strings.Join(info, "\n")+"\n")
	checkFixture(t, docsFixture, strings.Join(docs, "\n")+"\n")
}

// checkFixture fails when the file at path does not hold text, what a live
// redis-server answered; with -rewrite it writes text there instead.
func checkFixture(t *testing.T, path, text string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err == nil && string(got) == text {
		return
	}
	if !*rewrite {
		t.Errorf("%s differs from redis-server's replies (go test ./compat -run %s -rewrite regenerates it): %v", path, t.Name(), err)
		return
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCommandTable_Live: for every command and subcommand throttled has
// that Redis 7.0.15 has, COMMAND INFO and COMMAND DOCS answer as
// redis-server does, in RESP2 and RESP3, except that a container lists only
// the subcommands throttled has. (Those Redis 7.0 lacks, such as CLIENT
// SETINFO, are left out of the comparison.)
func TestCommandTable_Live(t *testing.T) {
	rd := startRedis(t, "")
	th := servertest.Start(t, server.Config{}).Addr()
	names, redisNames := commandNames(t, th), commandNames(t, rd)
	has := func(name string) bool { return slices.Contains(names, name) && slices.Contains(redisNames, name) }
	compared := 0
	for _, name := range names {
		for _, proto := range []int{2, 3} {
			want := ask(t, rd, proto, "COMMAND", "INFO", name)
			if want[1] == "  _" || want[1] == "  $-1" {
				continue // throttled's own
			}
			compared++
			keep := func(sub []string) bool { return has(unquote(t, sub[1])) }
			want = filterChildren(sortedSubs(want), nthChild(want, 1, 9), keep)
			got := ask(t, th, proto, "COMMAND", "INFO", name)
			if got[1] != "  $-1" && got[1] != "  _" {
				got = filterChildren(got, nthChild(got, 1, 9), keep)
			}
			if !slices.Equal(got, want) {
				t.Errorf("RESP%d COMMAND INFO %s:\nredis:\n\t%s\nthrottled:\n\t%s", proto, name, strings.Join(want, "\n\t"), strings.Join(got, "\n\t"))
			}
			keepKey := func(key string) bool { return has(unquote(t, key)) }
			want = sortedSubs(ask(t, rd, proto, "COMMAND", "DOCS", name))
			if h := docsSubs(want); h > 0 {
				want = filterPairs(want, h, keepKey)
			}
			got = ask(t, th, proto, "COMMAND", "DOCS", name)
			if h := docsSubs(got); h > 0 {
				got = filterPairs(got, h, keepKey)
			}
			if !slices.Equal(got, want) {
				t.Errorf("RESP%d COMMAND DOCS %s:\nredis:\n\t%s\nthrottled:\n\t%s", proto, name, strings.Join(want, "\n\t"), strings.Join(got, "\n\t"))
			}
		}
	}
	if compared < 100 {
		t.Fatalf("compared %d replies; the command list is too short", compared)
	}
}

// sortedSubs returns the reply of COMMAND INFO or COMMAND DOCS for one
// command with its subcommands in name order: Redis keeps them in a hash
// table, whose order changes from one run to the next.
func sortedSubs(lines []string) []string {
	if lines[0] == "*1" { // INFO: the tenth element of the entry
		return sortChildren(lines, nthChild(lines, 1, 9), 1)
	}
	if h := docsSubs(lines); h > 0 {
		return sortChildren(lines, h, 2)
	}
	return lines
}

// docsSubs returns the header index of the "subcommands" map in a COMMAND
// DOCS reply for one command, or -1.
func docsSubs(lines []string) int {
	if len(lines) < 3 {
		return -1
	}
	cs := children(lines, 2)
	for i := 0; i+1 < len(cs); i += 2 {
		if strings.TrimSpace(lines[cs[i]]) == `"subcommands"` {
			return cs[i+1]
		}
	}
	return -1
}

// sortChildren sorts the elements of the aggregate at lines[h] by their
// text, taking them by groups of size (2: a map's pairs).
func sortChildren(lines []string, h, size int) []string {
	cs := children(lines, h)
	var groups [][]string
	for i := 0; i < len(cs); i += size {
		groups = append(groups, lines[cs[i]:end(lines, cs[i+size-1])])
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(strings.Join(a, "\n"), strings.Join(b, "\n")) })
	out := slices.Clone(lines[:h+1])
	for _, g := range groups {
		out = append(out, g...)
	}
	return append(out, lines[end(lines, h):]...)
}

// commandNames returns COMMAND LIST of the server at addr.
func commandNames(t *testing.T, addr string) []string {
	var names []string
	for _, l := range ask(t, addr, 2, "COMMAND", "LIST")[1:] {
		names = append(names, unquote(t, strings.TrimSpace(l)))
	}
	slices.Sort(names)
	return names
}

// ask sends one command on a new connection speaking RESP proto and
// returns its reply in the scripts' format.
func ask(t *testing.T, addr string, proto int, args ...string) []string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, replyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	var out []string
	if proto == 3 {
		if _, err := nc.Write(resp.AppendCommand(nil, "HELLO", "3")); err != nil {
			t.Fatal(err)
		}
		if _, err := readReply(r, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write(resp.AppendCommand(nil, args...)); err != nil {
		t.Fatal(err)
	}
	if out, err = readReply(r, "", out); err != nil {
		t.Fatalf("%s: %v", args, err)
	}
	return out
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("%q is not a bulk string", s)
	}
	return u
}

// unindent takes two spaces off each line.
func unindent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimPrefix(l, "  ")
	}
	return out
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// children returns the line indexes where the children of the aggregate
// whose header is lines[h] start.
func children(lines []string, h int) []int {
	d := indentOf(lines[h])
	var out []int
	for i := h + 1; i < len(lines) && indentOf(lines[i]) > d; i++ {
		if indentOf(lines[i]) == d+2 {
			out = append(out, i)
		}
	}
	return out
}

// nthChild returns the header line index of the n-th child (from 0) of
// the aggregate at lines[h].
func nthChild(lines []string, h, n int) int { return children(lines, h)[n] }

// end returns the index after the element starting at lines[i].
func end(lines []string, i int) int {
	d := indentOf(lines[i])
	j := i + 1
	for j < len(lines) && indentOf(lines[j]) > d {
		j++
	}
	return j
}

// filterChildren keeps the children of the aggregate at lines[h] for which
// keep (given the child's lines) is true, and fixes the header's count.
func filterChildren(lines []string, h int, keep func(child []string) bool) []string {
	out := slices.Clone(lines[:h+1])
	n := 0
	for _, c := range children(lines, h) {
		if keep(lines[c:end(lines, c)]) {
			out = append(out, lines[c:end(lines, c)]...)
			n++
		}
	}
	out[h] = lines[h][:indentOf(lines[h])+1] + strconv.Itoa(n)
	return append(out, lines[end(lines, h):]...)
}

// filterPairs keeps the pairs of the map at lines[h] whose key line keep
// accepts, and fixes the header's count.
func filterPairs(lines []string, h int, keep func(key string) bool) []string {
	out := slices.Clone(lines[:h+1])
	n := 0
	cs := children(lines, h)
	for i := 0; i+1 < len(cs); i += 2 {
		if keep(lines[cs[i]]) {
			out = append(out, lines[cs[i]:end(lines, cs[i+1])]...)
			n++
		}
	}
	if lines[h][indentOf(lines[h])] == '*' {
		n *= 2 // RESP2 sends a map as a flat array
	}
	out[h] = lines[h][:indentOf(lines[h])+1] + strconv.Itoa(n)
	return append(out, lines[end(lines, h):]...)
}
