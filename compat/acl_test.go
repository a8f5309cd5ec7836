package compat

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/server"
)

// aclClient is a RESP2 go-redis client of addr for the ACL tests.
func aclClient(t *testing.T, addr string, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: e2eIOWait, ReadTimeout: e2eIOWait}
	if mod != nil {
		mod(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

func aclStrings(t *testing.T, ctx context.Context, c *redis.Client, args ...any) []string {
	t.Helper()
	v, err := c.Do(ctx, args...).StringSlice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// TestACL_CategoriesMatchRedis: every category of ours has, among the
// commands and subcommands both servers have, exactly Redis 7.0's members,
// and we list every category Redis does.
func TestACL_CategoriesMatchRedis(t *testing.T) {
	ctx := t.Context()
	rc := aclClient(t, startRedis(t, ""), nil)
	tc := aclClient(t, e2eNode(t, server.Config{}).Addr(), nil)
	cats := aclStrings(t, ctx, rc, "ACL", "CAT")
	if ours := aclStrings(t, ctx, tc, "ACL", "CAT"); !slices.Equal(ours, append(slices.Clone(cats), "ratelimit")) {
		t.Fatalf("ACL CAT: got %q, want Redis' %q and ratelimit", ours, cats)
	}
	theirs, ours := map[string][]string{}, map[string][]string{}
	inRedis, inOurs := map[string]bool{}, map[string]bool{}
	for _, cat := range cats {
		theirs[cat] = aclStrings(t, ctx, rc, "ACL", "CAT", cat)
		ours[cat] = aclStrings(t, ctx, tc, "ACL", "CAT", cat)
		for _, n := range theirs[cat] {
			inRedis[n] = true
		}
		for _, n := range ours[cat] {
			inOurs[n] = true
		}
	}
	shared := 0
	for _, cat := range cats {
		want := slices.Sorted(slices.Values(slices.DeleteFunc(theirs[cat], func(n string) bool { return !inOurs[n] })))
		got := slices.Sorted(slices.Values(slices.DeleteFunc(ours[cat], func(n string) bool { return !inRedis[n] })))
		if !slices.Equal(got, want) {
			t.Errorf("@%s, commands both have: got %q, want %q", cat, got, want)
		}
		shared += len(want)
	}
	if shared < 50 {
		t.Fatalf("only %d memberships compared: the lists look wrong", shared)
	}
}

// TestACL_RedisCommandsFixture regenerates commands/redis_commands.txt,
// every command and subcommand of redis-server 7.0.15 with its ACL
// categories (one a line: the name, then the categories in ACL CAT's
// order), and fails when it differs from the checked-in file (-rewrite
// writes it). ACL rules act on all of them, so ACL LIST shows a user's
// rules as Redis would.
func TestACL_RedisCommandsFixture(t *testing.T) {
	ctx := t.Context()
	rc := aclClient(t, startRedis(t, ""), nil)
	cats := map[string][]string{}
	for _, name := range aclStrings(t, ctx, rc, "COMMAND", "LIST") {
		cats[name] = nil
	}
	for _, cat := range aclStrings(t, ctx, rc, "ACL", "CAT") {
		for _, name := range aclStrings(t, ctx, rc, "ACL", "CAT", cat) {
			cats[name] = append(cats[name], cat)
		}
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(cats)) {
		b.WriteString(strings.Join(append([]string{name}, cats[name]...), " ") + "\n")
	}
	checkFixture(t, "../commands/redis_commands.txt", b.String())
}

// TestACL_FileFromRedis: an ACL file written by redis-server's ACL SAVE
// loads in throttled as it is, gives the same ACL LIST, and works; ACL SAVE
// writes it back the same.
func TestACL_FileFromRedis(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	redisFile := filepath.Join(dir, "redis.acl")
	if err := os.WriteFile(redisFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rc := aclClient(t, startRedis(t, "", "--aclfile", redisFile), nil)
	for _, rules := range [][]any{
		{"app", "on", ">apppass", "~app:*", "%R~ro:*", "%W~wo:*", "-@all", "+@string", "+@transaction"},
		{"ops", "on", ">opspass", "allkeys", "+@all", "-@dangerous"},
		{"reader", "on", "nopass", "~*", "-@all", "+@read"},
		{"sub", "on", "nopass", "allkeys", "+@all", "-client", "+client|id"},
		{"first", "on", "nopass", "allkeys", "-@all", "+select|0"},
		{"chans", "off", "&news", "&alerts", "reset", "&x"},
		{"hashed", "on", "#" + strings.Repeat("ab", 32), "~k", "-@all", "+@keyspace"},
		// Categories and commands throttled lacks are kept (issue 22).
		{"noset", "on", "nopass", "allkeys", "+@all", "-@set", "-hset"},
		{"sets", "on", "nopass", "~s:*", "-@all", "+@set", "+get"},
	} {
		if err := rc.Do(ctx, append([]any{"ACL", "SETUSER"}, rules...)...).Err(); err != nil {
			t.Fatalf("redis ACL SETUSER %v: %v", rules, err)
		}
	}
	if err := rc.Do(ctx, "ACL", "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(redisFile)
	if err != nil {
		t.Fatal(err)
	}
	ourFile := filepath.Join(dir, "throttled.acl")
	if err := os.WriteFile(ourFile, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	node := e2eNode(t, server.Config{ACLFile: ourFile})
	tc := aclClient(t, node.Addr(), nil)
	want := aclStrings(t, ctx, rc, "ACL", "LIST")
	if got := aclStrings(t, ctx, tc, "ACL", "LIST"); !slices.Equal(got, want) {
		t.Fatalf("ACL LIST of Redis' file:\ngot  %q\nwant %q", got, want)
	}

	app := aclClient(t, node.Addr(), func(o *redis.Options) { o.Username, o.Password = "app", "apppass" })
	if err := app.Set(ctx, "app:1", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	e2eWantRedisErr(t, "GET outside app's keys", app.Get(ctx, "other").Err(),
		"NOPERM this user has no permissions to access one of the keys used as arguments")

	if err := tc.Do(ctx, "ACL", "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(ourFile); err != nil || string(again) != string(saved) {
		t.Fatalf("ACL SAVE wrote %q (%v), want Redis' %q", again, err, saved)
	}
	raw := e2eDial(t, node.Addr())
	e2eMustDo(t, raw, "+OK\r\n", "AUTH", "app", "apppass")
	if err := tc.Do(ctx, "ACL", "LOAD").Err(); err != nil {
		t.Fatal(err)
	}
	if got := aclStrings(t, ctx, tc, "ACL", "LIST"); !slices.Equal(got, want) {
		t.Fatalf("ACL LIST after ACL LOAD: got %q, want %q", got, want)
	}
	// ACL LOAD replaced app: as in Redis, its connections are closed.
	if got, err := raw.Do("PING"); err == nil {
		t.Fatalf("PING on a connection of a user ACL LOAD replaced: %q, want the connection closed", got)
	}
}

// TestACL_FileErrors: a node does not start with an ACL file that does not
// load, and says why in Redis' words; ACL LOAD of a bad file changes
// nothing.
func TestACL_FileErrors(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	file := filepath.Join(dir, "users.acl")
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, err = server.Start(server.Config{Bind: "127.0.0.1", Port: port, ACLFile: file})
	if !errors.Is(err, commands.ErrACLFile) || !strings.Contains(err.Error(), "Error loading ACLs, opening file '"+file+"': no such file or directory") {
		t.Fatalf("start with a missing ACL file: %v", err)
	}
	if err := os.WriteFile(file, []byte("user a on +nosuch\nuser b on secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = server.Start(server.Config{Bind: "127.0.0.1", Port: port, ACLFile: file})
	want := file + ":1: Error in applying operation '+nosuch': Unknown command or category name in ACL. " +
		file + ":2: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	if err == nil || !strings.HasSuffix(err.Error(), want) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("start with a bad ACL file: %v", err)
	}

	if err := os.WriteFile(file, []byte("user a on nopass ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := aclClient(t, e2eNode(t, server.Config{ACLFile: file, RequirePass: "pw"}).Addr(), func(o *redis.Options) { o.Password = "pw" })
	// A file without a default user leaves it as requirepass makes it.
	if got := aclStrings(t, ctx, tc, "ACL", "USERS"); !slices.Equal(got, []string{"a", "default"}) {
		t.Fatalf("ACL USERS: %q", got)
	}
	if err := os.WriteFile(file, []byte("user a off\nuser a on\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2eWantRedisErr(t, "ACL LOAD", tc.Do(ctx, "ACL", "LOAD").Err(),
		"ERR WARNING: Duplicate user 'a' found on line 2. WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	if got := aclStrings(t, ctx, tc, "ACL", "LIST"); len(got) != 2 || !strings.HasPrefix(got[0], "user a on nopass") {
		t.Fatalf("ACL LIST after a failed ACL LOAD: %q", got)
	}
}
