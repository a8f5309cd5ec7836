package compat

import (
	"net"
	"os"
	"slices"
	"strings"
	"testing"
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

// gatewayOldRecipe is the rules of the one gateway user the README gave
// every gateway before issue 21: the throttle commands on keys
// "ratelimit:*". They fit none of the gateways, so a gateway logged in with
// them gets NOPERM error replies: the error the failure tests need. The
// tests add "+select" where the gateway's database is not 0, so that the
// error comes from the gateway's rate-limit commands themselves.
var gatewayOldRecipe = []string{"-@all", "+@ratelimit", "+ping", "+auth", "+hello", "~ratelimit:*"}

// gatewayDeadAddr returns a loopback address nothing listens on: a store
// the gateway cannot reach (connection refused).
func gatewayDeadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
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
