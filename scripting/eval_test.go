package scripting

import "testing"

// TestEval_Redis7Replies replays the EVAL rows of reference/redis7-replies.md
// (observed on Redis 7.0.15) byte for byte. setup commands run first through
// the same fake keyspace.
func TestEval_Redis7Replies(t *testing.T) {
	rows := []struct {
		setup [][]string
		src   string
		keys  []string
		want  string
	}{
		{src: "return {1,2,3.9,nil,4}", want: "*3\r\n:1\r\n:2\r\n:3\r\n"},
		{src: "return redis.call('nosuch')", want: "-ERR Unknown Redis command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.\r\n"},
		{src: "return {err='My Error'}", want: "-My Error\r\n"},
		{src: "return redis.error_reply('x y')", want: "-x y\r\n"},
		{src: "return redis.status_reply('FINE')", want: "+FINE\r\n"},
		{src: "return 3.99", want: ":3\r\n"},
		{src: "return true", want: ":1\r\n"},
		{src: "return false", want: "$-1\r\n"},
		{src: "return 'a'", want: "$1\r\na\r\n"},
		{src: "return redis.call('incr', KEYS[1])", keys: []string{"lk"}, want: ":1\r\n"},
		{src: "return redis.pcall('incr', 'ls')", want: ":1\r\n"},
		{setup: [][]string{{"set", "ls", "x"}}, src: "return redis.pcall('incr', 'ls')", want: "-ERR value is not an integer or out of range\r\n"},
		{setup: [][]string{{"set", "ls", "x"}}, src: "return redis.call('incr', 'ls')", want: "-ERR value is not an integer or out of range script: 42cbc957e1525d2e266151b0c925e2b133175fb3, on @user_script:1.\r\n"},
		{src: "os.exit()", want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: cfee573beed45589563480460931ee2e6ab1a8ab, on @user_script:1.\r\n"},
	}
	for _, r := range rows {
		t.Run(r.src, func(t *testing.T) {
			e := newEngine(t)
			db := newFakeDB()
			for _, cmd := range r.setup {
				db.Call(&Exec{proto: 2}, bs(cmd))
			}
			if got := eval(t, e, db, 2, r.src, r.keys, nil); got != r.want {
				t.Errorf("got %q, want %q", got, r.want)
			}
		})
	}
}

// TestScriptLoad_Redis7Reply checks the SHA of the SCRIPT LOAD row.
func TestScriptLoad_Redis7Reply(t *testing.T) {
	e := newEngine(t)
	s, err := e.Load([]byte("return 1"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.SHA(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if !e.Exists([]byte("e0e1f9fabfc9d4800c877a703b823ac0578ff8db")) || e.Exists([]byte("0000000000000000000000000000000000000000")) {
		t.Error("SCRIPT EXISTS: got wrong answer")
	}
}
