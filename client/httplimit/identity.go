package httplimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Identity is who a request is limited as.
type Identity struct {
	// Principal is "key:" and the keyed hash of a validated API key, or
	// "ip:" and the client's address (an IPv6 client's /64).
	Principal string
	// Tenant is what the key's validator said; "" for an IP.
	Tenant string
}

// keyHash is the principal of a validated API key: HMAC-SHA256 keyed by
// secret, 144 bits in hex, so the key never appears in a store key, a log
// line or a metric label, and cannot be recovered from them without the
// secret.
func keyHash(secret []byte, key string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(key))
	return "key:" + hex.EncodeToString(m.Sum(nil)[:18])
}

// ipPrincipal is the principal of a client address. IPv6 clients are
// limited per /64, the block one host (or one customer) usually gets, so
// rotating addresses inside it does not escape the limit.
func ipPrincipal(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return "ip:" + p.String()
	}
	return "ip:" + a.String()
}

// clientIP is the address of the request's client. The direct peer
// (RemoteAddr) is the client unless it is a trusted proxy; only then are
// the forwarding headers read (Forwarded when present, else
// X-Forwarded-For), right to left: each hop was appended by the proxy to
// its right, so the first hop that is not a trusted proxy is the client,
// and whatever stands left of it is what that client claimed, never
// believed. When every hop is trusted, the leftmost is the client; a hop
// that is not an address ("unknown", an obfuscated identifier) ends the
// walk at the trusted proxy that wrote it.
func clientIP(r *http.Request, trusted func(netip.Addr) bool) (netip.Addr, bool) {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok || !trusted(peer) {
		return peer, ok
	}
	hops := forwardedFor(r.Header)
	if hops == nil {
		hops = xForwardedFor(r.Header)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHost(hops[i])
		if !ok {
			break
		}
		client = a
		if !trusted(a) {
			break
		}
	}
	return client, true
}

// parseHost reads an address with or without a port, IPv6 in brackets or
// bare; an IPv4-mapped IPv6 address is its IPv4 address.
func parseHost(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// xForwardedFor lists the X-Forwarded-For hops of every such header, in
// order.
func xForwardedFor(h http.Header) []string {
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	return hops
}

// forwardedFor lists the for= values of every Forwarded element (RFC
// 7239), in order; nil without a Forwarded header. An element without
// for= counts as a hop that is not an address.
func forwardedFor(h http.Header) []string {
	vs := h.Values("Forwarded")
	if len(vs) == 0 {
		return nil
	}
	var hops []string
	for _, v := range vs {
		for _, elem := range strings.Split(v, ",") {
			hop := ""
			for _, pair := range strings.Split(elem, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(pair), "=")
				if strings.EqualFold(k, "for") {
					hop = strings.Trim(val, `"`)
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}
