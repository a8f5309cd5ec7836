package policy

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// Bounds of the policy table: a policy set larger than these is refused
// whole, so neither a file nor POLICY SET can grow the table (and the work
// of matching a request) without limit.
const (
	MaxPolicies = 10000
	MaxTiers    = 8
	MaxIDLen    = 128
	MaxNameLen  = 256 // a plain name, a tenant, a template
	MaxMethods  = 16
)

// Default and Unknown are the two endpoints that are not templates: Default
// applies to a request whose endpoint has no policy for it, Unknown to a
// request that matched no template (the UNKNOWN endpoint).
const (
	Default = "default"
	Unknown = "unknown"
)

// A Policy says which limits apply to the requests it matches.
type Policy struct {
	// ID names the policy in replies, keys and metrics.
	ID string
	// Exactly one of Path, Name and Fallback is set.
	//
	// Path is an HTTP path template (ParseTemplate) and Methods the
	// methods it covers, upper case (none: every method).
	Path    string
	Methods []string
	// Name matches a request for that plain name (non-HTTP use).
	Name string
	// Fallback is Default or Unknown.
	Fallback string

	// Tenant limits the policy to one tenant; "" is any tenant.
	Tenant string
	// Tiers are the limits; a request passes when every tier allows it,
	// and is charged on every tier or on none.
	Tiers []Tier
	// Disabled policies are kept but match nothing.
	Disabled bool
	// Shadow policies decide and count, but never refuse.
	Shadow bool
	// Cost is the units one request takes (a call may override it); 0
	// means 1.
	Cost int64
	// SecretPrincipal: the principal is a secret (an API key); keys hold a
	// keyed hash of it, never its text.
	SecretPrincipal bool
}

// The algorithms a tier may use, named as THROTTLE.ALL names them.
const (
	GCRA = "cl" // CL.THROTTLE's
	FWC  = "fwc"
	SWL  = "swl"
	SWC  = "swc"
	TB   = "tb"
	LB   = "lb"
)

// A Tier is one limit of a policy, with the parameters of its algorithm's
// command; times are in milliseconds.
//
//	cl:  Burst (max_burst), Count per Period
//	fwc, swl: Limit per Period (the window)
//	swc: Limit per Period in Subwindows (0: the engine's default)
//	tb:  Burst (capacity), refilled by Count every Period
//	lb:  Burst (capacity), leaking Count every Period
type Tier struct {
	Algorithm  string
	Limit      int64 // fwc, swl, swc
	Burst      int64 // cl, tb, lb
	Count      int64 // cl, tb, lb
	Period     int64 // ms
	Subwindows int64 // swc
}

// ErrInvalid is wrapped by every error of a policy that does not validate.
var ErrInvalid = errors.New("policy: invalid")

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// reason is an error's text without the ErrInvalid prefix, to wrap it in
// more context.
func reason(err error) string { return strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ") }

// Validate checks the policy whole; the error says what is wrong.
func (p *Policy) Validate() error {
	if err := checkID(p.ID); err != nil {
		return err
	}
	set := 0
	for _, s := range []string{p.Path, p.Name, p.Fallback} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		return errorf("policy %s: give exactly one of path, name or fallback", p.ID)
	}
	switch {
	case p.Path != "":
		if len(p.Path) > MaxNameLen {
			return errorf("policy %s: the path template is longer than %d bytes", p.ID, MaxNameLen)
		}
		if _, err := ParseTemplate(p.Path); err != nil {
			return errorf("policy %s: %s", p.ID, reason(err))
		}
	case p.Name != "":
		if err := checkText("name", p.Name); err != nil {
			return errorf("policy %s: %s", p.ID, reason(err))
		}
		if strings.HasPrefix(p.Name, "/") {
			return errorf("policy %s: a name cannot start with / (use path for a template)", p.ID)
		}
	case p.Fallback != Default && p.Fallback != Unknown:
		return errorf("policy %s: fallback is %q or %q, not %q", p.ID, Default, Unknown, p.Fallback)
	}
	if len(p.Methods) > 0 && p.Path == "" {
		return errorf("policy %s: methods go with a path template", p.ID)
	}
	if len(p.Methods) > MaxMethods {
		return errorf("policy %s: more than %d methods", p.ID, MaxMethods)
	}
	for _, m := range p.Methods {
		if !isToken(m) || m != strings.ToUpper(m) {
			return errorf("policy %s: %q is not an upper-case HTTP method", p.ID, m)
		}
	}
	if p.Tenant != "" {
		if err := CheckTenant(p.Tenant); err != nil {
			return errorf("policy %s: %s", p.ID, reason(err))
		}
	}
	if p.Cost < 0 {
		return errorf("policy %s: cost must not be negative", p.ID)
	}
	if len(p.Tiers) == 0 {
		return errorf("policy %s: it has no tiers", p.ID)
	}
	if len(p.Tiers) > MaxTiers {
		return errorf("policy %s: more than %d tiers", p.ID, MaxTiers)
	}
	for i, t := range p.Tiers {
		if err := t.Validate(); err != nil {
			return errorf("policy %s: tier %d: %s", p.ID, i+1, reason(err))
		}
	}
	return nil
}

// checkID: an id is 1 to MaxIDLen bytes of letters, digits and - _ .
// (no ":", which separates the parts of a tier's keys)
func checkID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return errorf("a policy id is 1 to %d characters", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.", c) >= 0) {
			return errorf("policy id %q: only letters, digits and - _ . are allowed", id)
		}
	}
	return nil
}

// CheckTenant: a tenant is printable, bounded and holds no ":", which
// separates the parts of a tier's keys.
func CheckTenant(t string) error {
	if strings.Contains(t, ":") {
		return errorf("the tenant %q holds a \":\"", t)
	}
	return checkText("tenant", t)
}

// checkText: a name or tenant is printable and bounded.
func checkText(what, s string) error {
	if len(s) > MaxNameLen {
		return errorf("the %s is longer than %d bytes", what, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return errorf("the %s %q holds a space or control character", what, s)
		}
	}
	return nil
}

// isToken: an HTTP method is a token (RFC 9110); we take letters only.
func isToken(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// Window is the time in milliseconds the tier's limit spans, the `w` of
// the IETF RateLimit-Policy field that goes with the limit as its `q`: a
// window's length (fwc, swl, swc), or the time a bucket takes to refill
// from empty (cl: (Burst+1) x Period / Count, its limit being Burst+1; tb,
// lb: Burst x Period / Count). So q/w is the sustained rate, and a reset
// never exceeds w. Saturates at MaxInt64.
func (t Tier) Window() int64 {
	var units int64
	switch t.Algorithm {
	case GCRA:
		units = t.Burst + 1
	case TB, LB:
		units = t.Burst
	default:
		return t.Period
	}
	if t.Count <= 0 || units < 0 || t.Period < 0 {
		return t.Period // not a valid tier: Validate says so
	}
	hi, lo := bits.Mul64(uint64(units), uint64(t.Period))
	if hi >= uint64(t.Count) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(t.Count))
	return int64(min(q, math.MaxInt64))
}

// Validate checks the tier's parameters as its command would.
func (t Tier) Validate() error {
	_, _, err := t.Build()
	return err
}

// Build makes the tier's limiter: a GCRA tier gives its gcra.Params and a
// nil Limiter, the others a Limiter. Times become nanoseconds.
func (t Tier) Build() (engines.Limiter, gcra.Params, error) {
	if t.Period <= 0 {
		return nil, gcra.Params{}, errorf("period must be a positive number of milliseconds")
	}
	if t.Period > math.MaxInt64/1_000_000 {
		return nil, gcra.Params{}, errorf("period is too large")
	}
	period := t.Period * 1_000_000
	var (
		l   engines.Limiter
		err error
	)
	switch t.Algorithm {
	case GCRA:
		if t.Burst < 0 || t.Count <= 0 {
			return nil, gcra.Params{}, errorf("cl: burst must not be negative and count must be positive")
		}
		// CL.THROTTLE's period is whole seconds; a tier's may be any
		// number of ms, so T = period/count is computed here, exactly
		// as gcra.NewParams does for seconds.
		p := gcra.Params{Burst: t.Burst, Interval: period / t.Count}
		if err := p.Validate(); err != nil {
			return nil, gcra.Params{}, errorf("cl: %v", err)
		}
		return nil, p, nil
	case FWC, SWL, SWC:
		if t.Limit <= 0 {
			return nil, gcra.Params{}, errorf("%s: limit must be positive", t.Algorithm)
		}
		switch t.Algorithm {
		case FWC:
			l, err = engines.NewFWC(t.Limit, period)
		case SWL:
			l, err = engines.NewSWL(t.Limit, period)
		default:
			sub := t.Subwindows
			if sub == 0 {
				sub = engines.DefaultSubwindows
			}
			l, err = engines.NewSWC(t.Limit, period, sub)
		}
	case TB, LB:
		if t.Burst <= 0 || t.Count <= 0 {
			return nil, gcra.Params{}, errorf("%s: capacity and count must be positive", t.Algorithm)
		}
		if t.Algorithm == TB {
			l, err = engines.NewTB(t.Burst, t.Count, period)
		} else {
			l, err = engines.NewLB(t.Burst, t.Count, period)
		}
	default:
		return nil, gcra.Params{}, errorf("unknown algorithm %q (use cl, fwc, swl, swc, tb or lb)", t.Algorithm)
	}
	if err != nil {
		return nil, gcra.Params{}, errorf("%s: %v", t.Algorithm, err)
	}
	if t.Subwindows != 0 && t.Algorithm != SWC {
		return nil, gcra.Params{}, errorf("%s: subwindows is for swc only", t.Algorithm)
	}
	return l, gcra.Params{}, nil
}

// covers reports whether the policy applies to the method.
func (p *Policy) covers(method string) bool {
	return len(p.Methods) == 0 || slices.Contains(p.Methods, method)
}
