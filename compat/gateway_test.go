package compat

import (
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/server"
)

// Shared by the gateway tests (nginx_test.go, envoy_ratelimit_test.go): the
// ACL recipes that each example's README gives its gateway's user, and what
// makes a gateway get no decision from throttled (an error reply, or no
// server at all).

// gatewayRecipePassword is the password the READMEs' recipes show.
const gatewayRecipePassword = ">long-random-password"

// gatewayRecipe returns the ACL SETUSER line that readme gives for user, as
// command arguments, with pass for the shown password and extra rules (a
// database's "+select|3") added: the test runs the gateway as exactly the
// user the README tells an operator to make.
func gatewayRecipe(t *testing.T, readme, user, pass string, extra ...string) []string {
	t.Helper()
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for line := range strings.Lines(string(text)) {
		args := strings.Fields(line)
		if len(args) > 3 && args[0] == "ACL" && args[1] == "SETUSER" && args[2] == user {
			if found != nil {
				t.Fatalf("%s: two ACL SETUSER lines for %s", readme, user)
			}
			found = args
		}
	}
	i := slices.Index(found, gatewayRecipePassword)
	if i < 0 {
		t.Fatalf("%s: no ACL SETUSER %s line with the password %s", readme, user, gatewayRecipePassword)
	}
	found[i] = ">" + pass
	return append(found, extra...)
}

// TestGatewayRecipes_Documented: every ACL SETUSER line of the examples'
// READMEs, which the gateway tests run as, is in docs/gateways.md word for
// word, so the page gives what is tested.
func TestGatewayRecipes_Documented(t *testing.T) {
	doc, err := os.ReadFile("../docs/gateways.md")
	if err != nil {
		t.Fatal(err)
	}
	docLines := map[string]bool{}
	for line := range strings.Lines(string(doc)) {
		docLines[strings.TrimSpace(line)] = true
	}
	for _, readme := range []string{"../examples/openresty/README.md", "../examples/kong/README.md", "../examples/envoy/README.md"} {
		text, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for line := range strings.Lines(string(text)) {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "ACL SETUSER ") {
				n++
				if !docLines[line] {
					t.Errorf("%s: %q is not a line of docs/gateways.md", readme, line)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no ACL SETUSER line", readme)
		}
	}
}

// gatewayOldRecipe is the rules of the one gateway user the README gave
// every gateway before issue 21: the throttle commands on keys
// "ratelimit:*". They fit none of the gateways, so a gateway logged in with
// them gets NOPERM error replies: the error the failure tests need. The
// tests add "+select" where the gateway's database is not 0, so that the
// error comes from the gateway's rate-limit commands themselves.
var gatewayOldRecipe = []string{"-@all", "+@ratelimit", "+ping", "+auth", "+hello", "~ratelimit:*"}

// gatewayStores returns two stores for a gateway that gets no decision: a
// node with the password pass whose default user (whom AUTH <pass> logs
// in) has the old recipe and then the extra rules, so it answers error
// replies; and a loopback address nothing listens on (connection refused).
func gatewayStores(t *testing.T, pass string, extra ...string) (erring *server.Node, dead string) {
	t.Helper()
	erring = e2eNode(t, server.Config{RequirePass: pass})
	admin := nginxDialAdmin(t, erring, pass)
	admin.want(t, "+OK\r\n", slices.Concat([]string{"ACL", "SETUSER", "default", "resetkeys"}, gatewayOldRecipe, extra)...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead = ln.Addr().String()
	ln.Close()
	return erring, dead
}

// gatewayEnv is the environment that points the nginx gateways at addr.
func gatewayEnv(t *testing.T, addr string) []string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"THROTTLED_HOST=" + host, "THROTTLED_PORT=" + port}
}

// gatewayCount returns how many of lines contain every one of texts.
func gatewayCount(lines []string, texts ...string) int {
	n := 0
	for _, l := range lines {
		if !slices.ContainsFunc(texts, func(s string) bool { return !strings.Contains(l, s) }) {
			n++
		}
	}
	return n
}
