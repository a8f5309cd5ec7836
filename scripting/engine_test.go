package scripting

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestCache_LoadLookupFlush(t *testing.T) {
	e := newEngine(t)
	s1, err := e.Load([]byte("return 1"))
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := e.Load([]byte("return 1"))
	if s1 != s2 {
		t.Error("the same body compiled twice")
	}
	sha := s1.SHA()
	for _, q := range []string{sha, strings.ToUpper(sha), "E0E1f9fabfc9d4800c877a703b823ac0578ff8db"} {
		if s, ok := e.Lookup([]byte(q)); !ok || s != s1 {
			t.Errorf("Lookup(%s) failed", q)
		}
	}
	for _, q := range []string{"", sha[:39], sha + "0", "0000000000000000000000000000000000000000"} {
		if _, ok := e.Lookup([]byte(q)); ok {
			t.Errorf("Lookup(%q) found a script", q)
		}
	}
	if got := e.Stats(); got.Scripts != 1 || got.Bytes != len("return 1") {
		t.Errorf("Stats: got %+v", got)
	}
	if s1.Source() != "return 1" || s1.Flags() != FlagEvalCompat {
		t.Errorf("Source %q Flags %v", s1.Source(), s1.Flags())
	}

	// A flushed script is gone from the cache but still runs for whoever
	// holds it.
	w := writer(2)
	e.Run(context.Background(), s1, nil, nil, newFakeDB(), w)
	e.Flush()
	if e.Exists([]byte(sha)) || e.Stats().Scripts != 0 {
		t.Error("Flush left the script")
	}
	e.Run(context.Background(), s1, nil, nil, newFakeDB(), w)
	if got := string(w.Bytes()); got != ":1\r\n:1\r\n" {
		t.Errorf("got %q", got)
	}
	s3, _ := e.Load([]byte("return 1"))
	if s3 == s1 || !e.Exists([]byte(sha)) {
		t.Error("Load after Flush did not recompile")
	}
}

func TestLoad_CompileErrors(t *testing.T) {
	for src, want := range map[string]string{
		"return 1 +":          "ERR Error compiling script (new function): user_script:1: syntax error near '<eof>'",
		"x y":                 "ERR Error compiling script (new function): user_script:1: parse error near 'y'",
		"return 1\n\nfoo bar": "ERR Error compiling script (new function): user_script:3: syntax error near 'foo'",
		"return 'abc":         "ERR Error compiling script (new function): user_script:1: unterminated string near '<eof>'",
		"goto x":              "ERR Error compiling script (new function): user_script:2: no visible label 'x' for <goto> at line 1",
	} {
		_, err := newEngine(t).Load([]byte(src))
		var re *ReplyError
		if !errors.As(err, &re) || !errors.Is(err, ErrCompile) || re.Reply != want {
			t.Errorf("%q: got %v, want %q", src, err, want)
		}
	}
}

func TestLoad_Shebang(t *testing.T) {
	for _, c := range []struct {
		src   string
		flags Flags
		err   string
	}{
		{src: "#!lua\nreturn 1", flags: 0},
		{src: "#!lua flags=no-writes\nreturn 1", flags: FlagNoWrites},
		{src: "#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1", flags: FlagNoWrites | FlagAllowOOM | FlagAllowStale | FlagNoCluster | FlagAllowCrossSlot},
		{src: "#!lua flags=\nreturn 1", flags: 0},
		{src: "#!lua", err: "ERR Invalid script shebang"},
		{src: "#!python\nreturn 1", err: "ERR Unexpected engine in script shebang: #!python"},
		{src: "#!lua foo=bar\nreturn 1", err: "ERR Unknown lua shebang option: foo=bar"},
		{src: "#!lua flags=no-writes,bogus\nreturn 1", err: "ERR Unexpected flag in script shebang: bogus"},
	} {
		s, err := newEngine(t).Load([]byte(c.src))
		if c.err != "" {
			var re *ReplyError
			if !errors.As(err, &re) || !errors.Is(err, ErrShebang) || re.Reply != c.err {
				t.Errorf("%q: got %v, want %q", c.src, err, c.err)
			}
			continue
		}
		if err != nil || s.Flags() != c.flags {
			t.Errorf("%q: got %v, %v; want flags %v", c.src, s, err, c.flags)
		}
	}
	// The shebang line still counts in error positions.
	src := "#!lua\nerror('x')"
	got := eval(t, newEngine(t), newFakeDB(), 2, src, nil, nil)
	if want := "-ERR user_script:2: x script: " + SHA1Hex([]byte(src)) + ", on @user_script:2.\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestScript_ReadOnly(t *testing.T) {
	e := newEngine(t)
	for _, c := range []struct {
		src      string
		ro, want bool
		err      bool
	}{
		{"return 1", false, false, false},
		{"return 1", true, true, false},
		{"#!lua\nreturn 1", false, false, false},
		{"#!lua\nreturn 1", true, true, true},
		{"#!lua flags=no-writes\nreturn 1", false, true, false},
		{"#!lua flags=no-writes\nreturn 1", true, true, false},
	} {
		s, _ := e.Load([]byte(c.src))
		got, err := s.ReadOnly(c.ro)
		var re *ReplyError
		if got != c.want || (err != nil) != c.err || (err != nil && (!errors.As(err, &re) || re.Reply != ReplyWriteFlag)) {
			t.Errorf("%q ro=%v: got %v %v", c.src, c.ro, got, err)
		}
	}
}

// TestRun_Concurrent runs many scripts at once; with -race it also checks
// the pool, Busy and Kill for data races.
func TestRun_Concurrent(t *testing.T) {
	e := newEngine(t)
	db := newFakeDB()
	s, err := e.Load([]byte(kongScript))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := s
			key := "k" + itoa(int64(g))
			for i := 0; i < 200; i++ {
				w := writer(2)
				e.Run(context.Background(), s, bs([]string{key}), bs([]string{"60"}), db, w)
				if got, want := string(w.Bytes()), ":"+itoa(int64(i))+"\r\n"; got != want {
					t.Errorf("goroutine %d run %d: got %q, want %q", g, i, got, want)
					return
				}
				e.Busy()
				if i%50 == 0 {
					e.Flush()
					s, _ = e.Load([]byte(kongScript))
				}
			}
		}()
	}
	wg.Wait()
	if err := e.Kill(); !errors.Is(err, ErrNotBusy) {
		t.Errorf("Kill: got %v", err)
	}
	if db.ttl["k0"] != 60 {
		t.Errorf("EXPIRE not called: %v", db.ttl)
	}
}

// TestPool_Registry checks that interpreters the pool dropped leave the
// list Busy and Kill walk.
func TestPool_Registry(t *testing.T) {
	e := New(Options{})
	for i := 0; i < 5; i++ {
		e.register(newVM(e))
	}
	runtime.GC()
	keep := newVM(e)
	e.register(keep)
	n := 0
	e.each(func(*vm) { n++ })
	if len(e.reg) != 1 || n != 1 {
		t.Errorf("got %d entries, %d live; want 1", len(e.reg), n)
	}
	runtime.KeepAlive(keep)
}
