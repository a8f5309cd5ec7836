package retry

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Transport is an http.RoundTripper that sends each request through a
// Client: in its turn, when the strategy lets it, again after each 429
// until it passes or MaxAttempts were made. The response the caller gets
// is the last one (a 429 when the attempts ran out); the bodies of the
// refused ones are drained and closed. A request with a body is retried
// only if it has GetBody (as http.NewRequest sets for in-memory bodies).
type Transport struct {
	Client *Client
	// Base sends each attempt (http.DefaultTransport when nil).
	Base http.RoundTripper
	// MaxAttempts bounds the attempts per request (0: until the request's
	// context ends).
	MaxAttempts int
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	attempts := t.MaxAttempts
	rewind := req.Body != nil && req.Body != http.NoBody
	if rewind && req.GetBody == nil {
		attempts = 1 // the body cannot be sent again
	}
	var resp *http.Response
	_, err := t.Client.Do(req.Context(), attempts, func() (Outcome, error) {
		r := req
		if resp != nil {
			// The refused response before this attempt is done with.
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			resp = nil
			if rewind {
				body, err := req.GetBody()
				if err != nil {
					return Outcome{}, err
				}
				r = req.Clone(req.Context())
				r.Body = body
			}
		}
		var err error
		resp, err = base.RoundTrip(r)
		if err != nil {
			return Outcome{}, err
		}
		limited := resp.StatusCode == http.StatusTooManyRequests
		return Outcome{Limited: limited, Hint: ParseHint(resp.Header, t.Client.clock.Now())}, nil
	})
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

// ParseHint reads what a response's header says of the limit: Retry-After
// (seconds, or an HTTP date measured from now), and the IETF RateLimit
// fields, both the structured form throttled's gateways send
// (`RateLimit: "default";r=15;t=2` with `RateLimit-Policy:
// "default";q=16;w=60`) and the older separate fields (RateLimit-Limit,
// RateLimit-Remaining, RateLimit-Reset, in seconds). Fields that are absent
// or unreadable stay unknown.
func ParseHint(h http.Header, now time.Time) Hint {
	hint := NoHint
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && s >= 0 {
			hint.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			hint.RetryAfter = max(t.Sub(now), 0)
		}
	}
	if v := h.Get("RateLimit"); v != "" {
		params := sfParams(v)
		if r, ok := params["r"]; ok {
			hint.Remaining = r
		}
		if t, ok := params["t"]; ok {
			hint.Reset = time.Duration(t) * time.Second
		}
	}
	if v := h.Get("RateLimit-Policy"); v != "" {
		if q, ok := sfParams(v)["q"]; ok {
			hint.Limit = q
		}
	}
	for name, field := range map[string]*int64{"RateLimit-Limit": &hint.Limit, "RateLimit-Remaining": &hint.Remaining} {
		if n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64); err == nil && n >= 0 {
			*field = n
		}
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(h.Get("RateLimit-Reset")), 10, 64); err == nil && n >= 0 {
		hint.Reset = time.Duration(n) * time.Second
	}
	return hint
}

// sfParams reads the integer parameters of a structured field's first item
// (`"default";r=15;t=2` -> r: 15, t: 2).
func sfParams(v string) map[string]int64 {
	item, _, _ := strings.Cut(v, ",")
	out := map[string]int64{}
	for _, p := range strings.Split(item, ";")[1:] {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if n, err := strconv.ParseInt(val, 10, 64); ok && err == nil && n >= 0 {
			out[k] = n
		}
	}
	return out
}
