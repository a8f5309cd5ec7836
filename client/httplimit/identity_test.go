package httplimit

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientIP: which address a request is limited as, for each shape of
// forwarding chain.
func TestClientIP(t *testing.T) {
	trusted := func(a netip.Addr) bool { return netip.MustParsePrefix("10.0.0.0/8").Contains(a) }
	for _, tc := range []struct {
		peer    string
		headers []string
		want    string
	}{
		{"198.51.100.1:1", []string{"X-Forwarded-For", "1.2.3.4"}, "198.51.100.1"},                                        // untrusted peer: headers ignored
		{"10.0.0.1:1", nil, "10.0.0.1"},                                                                                   // a proxy without headers is its own client
		{"10.0.0.1:1", []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.0.0.2"}, "203.0.113.9"},                      // right to left, trusted hops skipped
		{"10.0.0.1:1", []string{"X-Forwarded-For", "10.0.0.3, 10.0.0.2"}, "10.0.0.3"},                                     // all trusted: the leftmost
		{"10.0.0.1:1", []string{"X-Forwarded-For", "6.6.6.6, unknown, 10.0.0.2"}, "10.0.0.2"},                             // not an address: the proxy that wrote it
		{"10.0.0.1:1", []string{"X-Forwarded-For", " 203.0.113.9 ,10.0.0.2 "}, "203.0.113.9"},                             // spaces
		{"10.0.0.1:1", []string{"Forwarded", `for="[2001:db8::1]:80", for=10.0.0.2:99`}, "2001:db8::1"},                   // RFC 7239, ports
		{"10.0.0.1:1", []string{"Forwarded", "for=203.0.113.9;by=10.0.0.2", "X-Forwarded-For", "6.6.6.6"}, "203.0.113.9"}, // Forwarded wins
		{"10.0.0.1:1", []string{"Forwarded", "by=10.0.0.2;proto=https"}, "10.0.0.1"},                                      // an element without for=
		{"[::ffff:10.0.0.1]:1", []string{"X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},                                // IPv4-mapped peer
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for i := 0; i+1 < len(tc.headers); i += 2 {
			r.Header.Add(tc.headers[i], tc.headers[i+1])
		}
		got, ok := clientIP(r, trusted)
		if !ok || got.String() != tc.want {
			t.Errorf("%s %v: %v %v, want %s", tc.peer, tc.headers, got, ok, tc.want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@unix"
	if _, ok := clientIP(r, trusted); ok {
		t.Error("a peer that is not an address has an IP")
	}
}
