package commands

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/resp"
)

// rulesOf applies space-separated rules to a new user, failing the test on
// a bad one.
func rulesOf(t testing.TB, rules string) *userRules {
	t.Helper()
	initACLIndex()
	r := newUserRules()
	for _, op := range strings.Split(rules, " ") {
		if err := r.apply(op); err != nil {
			t.Fatalf("%q: %s", op, err.reason)
		}
	}
	return r.seal()
}

func argsOf(s string) [][]byte {
	var args [][]byte
	for _, a := range strings.Fields(s) {
		args = append(args, []byte(a))
	}
	return args
}

func TestACL_TableCategories(t *testing.T) {
	initACLIndex()
	for _, sp := range specs {
		if (sp.Categories&CatFast != 0) == (sp.Categories&CatSlow != 0) {
			t.Errorf("%s: want exactly one of @fast and @slow", sp.Name)
		}
		if (sp.Flags&Fast != 0) != (sp.Categories&CatFast != 0) {
			t.Errorf("%s: the Fast flag and @fast disagree", sp.Name)
		}
		if throttle := sp.Group == "throttle"; throttle != (sp.Categories&CatRatelimit != 0) {
			t.Errorf("%s: @ratelimit is for the throttle commands, and all of them", sp.Name)
		}
		if (sp.FirstKey != 0 || sp.KeysFn != nil) && sp.Access == 0 && sp.AccessFn == nil {
			t.Errorf("%s: has keys but no Access for ACL key patterns", sp.Name)
		}
		if !slices.IsSortedFunc(sp.Subcommands, func(a, b Sub) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("%s: subcommands not listed by name", sp.Name)
		}
		for _, sub := range sp.Subcommands {
			if (sub.Categories&CatFast != 0) == (sub.Categories&CatSlow != 0) {
				t.Errorf("%s|%s: want exactly one of @fast and @slow", sp.Name, sub.Name)
			}
		}
	}
	if e := aclIndex.lookup("CLIENT|Kill"); e == nil || e.name != "client|kill" {
		t.Errorf("lookup(CLIENT|Kill) = %v", e)
	}
}

// TestACL_Describe pins ACL LIST's command rules for users a gateway or an
// operator would make, after Redis 7.0's algorithm over our table.
func TestACL_Describe(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{"", "resetchannels -@all"},
		{"+@all ~* &*", "~* &* +@all"},
		{"allcommands allkeys allchannels", "~* &* +@all"},
		{"+@all -@dangerous", "resetchannels +@all -@dangerous"},
		{"-@all +@ratelimit +ping +auth +hello ~ratelimit:*", "~ratelimit:* resetchannels -@all +@ratelimit +auth +hello +ping"},
		{"+@ratelimit -cl.throttle", "resetchannels -@all +@ratelimit -cl.throttle"},
		{"+@ratelimit -cl.throttle -fwc.throttle -lb.throttle -swc.throttle -quota.lease -quota.return -telemetry.get -telemetry.report", "resetchannels -@all +swl.throttle +tb.throttle +throttle.all +throttle.policy"},
		{"+@all -client +client|id", "resetchannels +@all -client +client|id"},
		{"-@all +select|0 +select|1", "resetchannels -@all +select|0 +select|1"},
		{"+select|0 +select", "resetchannels -@all +select"},
		{"%R~r* %W~w* ~b* %RW~b* %W~r*", "~r* %W~w* ~b* resetchannels -@all"},
		{"&a &b &a", "resetchannels &a &b -@all"},
		{"+@all -get +get", "resetchannels +@all"},
		// Redis' commands this server lacks count as in Redis.
		{"+hset -lpush +client|pause", "resetchannels -@all +client|pause +hset"},
		{"+@all -@set", "resetchannels +@all -@set"},
		{"-@all +@set +get", "resetchannels -@all +@set +get"},
		{"+@all -@set +@set -@hash", "resetchannels +@all -@hash"},
		{"-@all +@read -@write", "resetchannels -@all +@read"},
		{"+@all -@pubsub -@blocking -@geo", "resetchannels +@all -@pubsub -@geo -@blocking"},
		{"-@all +hset|f1", "resetchannels -@all +hset|f1"},
	} {
		r := rulesOf(t, tc.rules)
		if r.selector != tc.want {
			t.Errorf("%q: got %q, want %q", tc.rules, r.selector, tc.want)
		}
	}
}

func TestACL_Errors(t *testing.T) {
	initACLIndex()
	for _, tc := range []struct {
		rule string
		want *ruleError
	}{
		{"+nosuch", errRuleUnknown},
		{"-nosuch", errRuleUnknown},
		{"+@nosuch", errRuleUnknown},
		{"+", errRuleUnknown},
		{"+@", errRuleUnknown},
		{"+get|x|y", errRuleUnknown},
		{"+client|id|x", errRuleFirstArgSub},
		{"+client|pause|x", errRuleFirstArgSub},
		{"+client|nosuch", errRuleUnknown},
		{"+get|", errRuleSyntax},
		{"-get|x", errRuleUnknown},
		{"%X~a", errRuleSyntax},
		{"%~a", errRuleSyntax},
		{"%RR~a", errRuleSyntax},
		{"~a\tb", errRuleSyntax},
		{"secret", errRuleUnknownWord},
		{"#abc", errRuleBadHash},
		{"#" + strings.Repeat("A", 64), errRuleBadHash},
		{"!" + strings.Repeat("0", 64), errRuleNoSuchPass},
		{"<nosuch", errRuleNoSuchPass},
		{"(+get ~x)", errRuleSelector},
	} {
		if got := newUserRules().apply(tc.rule); got != tc.want {
			t.Errorf("%q: got %v, want %v", tc.rule, got, tc.want)
		}
	}
	r := rulesOf(t, "allkeys allchannels")
	if err := r.apply("~x"); err != errRuleKeysAll {
		t.Errorf("~x after allkeys: %v", err)
	}
	if err := r.apply("&x"); err != errRuleChannelsAll {
		t.Errorf("&x after allchannels: %v", err)
	}
}

func TestACL_Check(t *testing.T) {
	for _, tc := range []struct {
		rules, cmd string
		want       denial
	}{
		{"+@all allkeys", "GET k", permitted},
		{"-@all +get allkeys", "SET k v", deniedCommand},
		{"-@all +@ratelimit ~rl:*", "CL.THROTTLE rl:1 1 1 1", permitted},
		{"-@all +@ratelimit ~rl:*", "CL.THROTTLE other 1 1 1", deniedKey},
		{"-@all +@ratelimit ~rl:*", "THROTTLE.ALL LIMIT CL rl:1 1 1 1 LIMIT CL x 1 1 1", deniedKey},
		{"-@all +@ratelimit %R~rl:*", "CL.THROTTLE rl:1 1 1 1", deniedKey},
		{"-@all +@ratelimit ~rl:*", "GET rl:1", deniedCommand},
		{"+@all %R~r*", "GET r1", permitted},
		{"+@all %R~r*", "SET r1 v", deniedKey},
		{"+@all %W~w*", "SET w1 v", permitted},
		{"+@all %W~w*", "SET w1 v GET", deniedKey},
		{"+@all %W~w*", "EXISTS w1", permitted},
		{"+@all %W~w*", "EXISTS x1", deniedKey},
		{"+@all %W~w*", "DEBUG DIGEST-VALUE x1", permitted},
		{"+@all %R~r*", "EVAL_RO x 1 r1", permitted},
		{"+@all %R~r*", "EVAL x 1 r1", deniedKey},
		{"-@all", "AUTH x", permitted},
		{"+@all -client +client|id allkeys", "CLIENT ID", permitted},
		{"+@all -client +client|id allkeys", "CLIENT KILL ID 1", deniedCommand},
		{"-@all +select|0", "SELECT 0", permitted},
		{"-@all +select|0", "SELECT 1", deniedCommand},
		{"-@all +select|0", "PING", deniedCommand},
		{"+@all -@dangerous allkeys", "CONFIG GET x", deniedCommand},
		{"+@all -@dangerous allkeys", "CONFIG HELP", permitted},
	} {
		s, _ := newTestServer(t)
		r := rulesOf(t, tc.rules)
		args := argsOf(tc.cmd)
		if got := r.check(s.cmds.lookup(args[0]), args); got != tc.want {
			t.Errorf("%q running %q: got %d, want %d", tc.rules, tc.cmd, got, tc.want)
		}
	}
}

// TestACL_Dispatch runs commands as a limited user through ServeRESP.
func TestACL_Dispatch(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	for _, step := range []struct{ cmd, want string }{
		{"ACL SETUSER gateway on >gw -@all +@ratelimit +ping +auth +hello ~ratelimit:*", "+OK\r\n"},
		{"AUTH gateway gw", "+OK\r\n"},
		{"CL.THROTTLE ratelimit:1 1 1 1", "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n"},
		{"CL.THROTTLE other 1 1 1", "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"},
		{"GET ratelimit:1", "-NOPERM this user has no permissions to run the 'get' command\r\n"},
		{"CONFIG GET maxmemory", "-NOPERM this user has no permissions to run the 'config|get' command\r\n"},
		{"PING", "+PONG\r\n"},
		{"RESET", "+RESET\r\n"},
		{"GET ratelimit:1", "$"},
	} {
		got := do(s, c, strings.Fields(step.cmd)...)
		if !strings.HasPrefix(got, step.want) {
			t.Fatalf("%s: got %q, want %q", step.cmd, got, step.want)
		}
	}
}

// checkRoundTrip fails unless r's description, applied to a new user,
// gives the same permissions and the same description.
func checkRoundTrip(t *testing.T, r *userRules) {
	t.Helper()
	again := newUserRules()
	for _, op := range strings.Split(r.selector, " ") {
		if err := again.apply(op); err != nil {
			t.Fatalf("description %q: rule %q: %s", r.selector, op, err.reason)
		}
	}
	again.seal()
	if again.selector != r.selector {
		t.Fatalf("description %q reads back as %q", r.selector, again.selector)
	}
	if again.cmds != r.cmds || again.future != r.future || again.allKeys != r.allKeys ||
		again.allChannels != r.allChannels || !slices.Equal(again.keys, r.keys) ||
		!slices.Equal(again.channels, r.channels) || !maps.EqualFunc(again.firstArgs, r.firstArgs, slices.Equal) {
		t.Fatalf("description %q gives other permissions", r.selector)
	}
}

// FuzzACLRules applies rules from random text (one a line) to a new user:
// no input makes the parser or ACL LIST's description panic (it panics
// when the description would not rebuild the user), and the description
// reads back as the same user.
func FuzzACLRules(f *testing.F) {
	for _, s := range []string{
		"on\n>pw\n~*\n+@all",
		"+@all\n-@dangerous\n+info\n-client\n+client|id",
		"-@all\n+@ratelimit\n+ping\n~ratelimit:*\n%R~r*\n%W~w*",
		"+select|0\n+debug|foo\n-@all\n+cluster|info",
		"reset\n&a\nallchannels\nresetchannels\n&b",
		"+@read\n-@write\n+@fast\n-@keyspace\n+@string\n-get",
		"nopass\n#" + strings.Repeat("ab", 32) + "\n!" + strings.Repeat("ab", 32),
		"+hset\n-lpush\n+client|pause\n(+get)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rules string) {
		initACLIndex()
		r := newUserRules()
		for _, op := range strings.Split(rules, "\n") {
			r.apply(op)
		}
		r.seal()
		if strings.Contains(r.selector, "  ") || strings.HasSuffix(r.selector, " ") {
			t.Fatalf("description %q has stray spaces", r.selector)
		}
		// Patterns with spaces never get in, so the description splits
		// back into the same rules.
		checkRoundTrip(t, r)
	})
}

// quotesOther reports whether text is also within a rule that is not a
// password, which an error may quote: ">+" beside a bad "+" is no leak.
func quotesOther(text string, ops []string) bool {
	for _, op := range ops {
		if op != "" && op[0] != '>' && op[0] != '<' && strings.Contains(op, text) {
			return true
		}
	}
	return false
}

// FuzzACLSetUser sends ACL SETUSER with random rules (one a line) through
// the dispatcher: the reply is OK or a one-line error that repeats no
// password, a refused SETUSER changes nothing, and the user's ACL LIST
// line loads back as the same user.
func FuzzACLSetUser(f *testing.F) {
	f.Add("on\n>secret\n~app:*\n-@all\n+@ratelimit")
	f.Add(">secret\nsecret2\n+get")
	f.Add("<secret\n+@all")
	f.Add("#" + strings.Repeat("0", 64) + "\n+@all\n-@all\n+select|1")
	f.Fuzz(func(t *testing.T, rules string) {
		s, _ := newTestServer(t)
		c := &resp.Conn{}
		do(s, c, "ACL", "SETUSER", "u", "on", ">secret", "+@all")
		before := do(s, c, "ACL", "LIST")
		args := append([]string{"ACL", "SETUSER", "u"}, strings.Split(rules, "\n")...)
		got := do(s, c, args...)
		switch {
		case got == "+OK\r\n":
		case strings.HasPrefix(got, "-ERR ") && strings.Count(got, "\r\n") == 1:
			if after := do(s, c, "ACL", "LIST"); after != before {
				t.Fatalf("refused SETUSER changed the users: %q -> %q", before, after)
			}
		default:
			t.Fatalf("reply %q", got)
		}
		ops := strings.Split(rules, "\n")
		for _, op := range ops {
			if len(op) > 1 && (op[0] == '>' || op[0] == '<') && !bytes.Contains([]byte(op[1:]), []byte("'")) &&
				strings.Contains(got, "'"+op[1:]+"'") && strings.HasPrefix(got, "-") && !quotesOther(op[1:], ops) {
				t.Fatalf("error %q repeats the password of %q", got, op)
			}
		}
		r := s.acl.user("u").rules.Load()
		checkRoundTrip(t, r)
		// ACL LIST's line for u, less "user u ", is the whole user.
		var line string
		for _, l := range strings.Split(do(s, c, "ACL", "LIST"), "\r\n") {
			if strings.HasPrefix(l, "user u ") {
				line = strings.TrimPrefix(l, "user u ")
			}
		}
		users, problems := parseACLFile("f", "user u "+line)
		if problems != "" {
			t.Fatalf("ACL LIST line %q does not load: %s", line, problems)
		}
		back := users["u"].seal()
		if back.describe() != r.describe() || !slices.Equal(back.passwords, r.passwords) {
			t.Fatalf("ACL LIST line %q loads as %q", line, back.describe())
		}
	})
}
