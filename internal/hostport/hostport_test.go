package hostport

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7001":     "",
		"[::1]:7001":         "",
		"node-a.local:65535": "",
		"127.0.0.1:notaport": "the port must be a number",
		"127.0.0.1:0":        "the port must be a number",
		"127.0.0.1:65536":    "the port must be a number",
		"127.0.0.1:-1":       "the port must be a number",
		"127.0.0.1:redis":    "the port must be a number",
		":7001":              "the host is missing",
		"127.0.0.1":          "want host:port",
		"":                   "want host:port",
	} {
		err := Check(addr)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Check(%q) = %v, want %q", addr, err, want)
		}
	}
}

func TestWildcard(t *testing.T) {
	for addr, want := range map[string]bool{"0.0.0.0:1": true, "[::]:1": true, "127.0.0.1:1": false, "host:1": false, "0.0.0.0": false} {
		if got := Wildcard(addr); got != want {
			t.Errorf("Wildcard(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestDialable(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7001":     "",
		"127.0.0.1:notaport": "the port must be a number",
		"0.0.0.0:7001":       "wildcard",
		"[::]:7001":          "wildcard",
	} {
		err := Dialable(addr)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Dialable(%q) = %v, want %q", addr, err, want)
		}
	}
}
