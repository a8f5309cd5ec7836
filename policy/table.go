package policy

import (
	"slices"
	"strings"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// A Table is a checked set of policies, indexed for Resolve. It is
// immutable once built, and so safe for concurrent use.
type Table struct {
	byID     map[string]*Policy
	built    map[*Policy][]Built // each policy's tiers, built once
	ids      []string            // sorted
	root     *node               // the templates, as a trie of segments
	names    map[string]*group
	fallback map[string]*group // Default, Unknown
	// def and unknown are fallback's two groups (nil if none), which
	// every request's steps look in.
	def, unknown *group
}

// A group is the policies of one endpoint (a template shape, a name or a
// fallback): the policies of each tenant, "" for any.
type group struct {
	endpoint string
	tenants  map[string][]*Policy
	// anyMethod: some policy covers every method; else methods are those
	// some policy covers (coversAny without walking the tenants).
	anyMethod bool
	methods   []string
}

// pick is the group's policy for the tenant and method, nil if none.
func (g *group) pick(tenant, method string) *Policy {
	if g == nil {
		return nil
	}
	for _, p := range g.tenants[tenant] {
		if p.covers(method) {
			return p
		}
	}
	return nil
}

// coversAny reports whether some policy of the group applies to the
// method, whatever the tenant: then a request with that method has found
// its endpoint, even if its own tenant has no policy there.
func (g *group) coversAny(method string) bool {
	return g != nil && (g.anyMethod || slices.Contains(g.methods, method))
}

// node is one position of the template trie. Looking a path up walks it in
// the order of specificity (literal, one segment, the template's end, the
// rest), so the first group found is the most specific template's.
type node struct {
	literal map[string]*node
	one     *node  // "*" or "{name}"
	end     *group // a template that ends here
	rest    *group // a template whose "**" starts here
}

// New checks the policies and builds their table. Disabled policies are
// kept (Get, Policies) but match nothing. Two enabled policies of one
// endpoint and tenant whose methods overlap are refused: no request may
// have two answers.
func New(ps []Policy) (*Table, error) {
	if len(ps) > MaxPolicies {
		return nil, errorf("%d policies; at most %d", len(ps), MaxPolicies)
	}
	t, errs := build(ps, true)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return t, nil
}

// Build is New for a set that must load whatever it holds (what replicas
// converged on): a policy New would refuse is left out, in the order the
// policies are given, and its error returned. Given the same policies in
// the same order, every node builds the same table.
func Build(ps []Policy) (*Table, []error) { return build(ps, false) }

func build(ps []Policy, strict bool) (*Table, []error) {
	t := &Table{byID: map[string]*Policy{}, built: map[*Policy][]Built{}, root: &node{}, names: map[string]*group{}, fallback: map[string]*group{}}
	var errs []error
	for i := range ps {
		if err := t.add(&ps[i]); err != nil {
			errs = append(errs, err)
			if strict {
				return nil, errs
			}
		}
	}
	slices.Sort(t.ids)
	t.def, t.unknown = t.fallback[Default], t.fallback[Unknown]
	return t, errs
}

// add adds p, or refuses it leaving t as it was.
func (t *Table) add(p *Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if _, dup := t.byID[p.ID]; dup {
		return errorf("policy id %q is used twice", p.ID)
	}
	if !p.Disabled {
		var g *group
		switch {
		case p.Path != "":
			g = t.templateGroup(p.Path)
		case p.Name != "":
			g = groupIn(t.names, p.Name)
		default:
			g = groupIn(t.fallback, p.Fallback)
		}
		for _, o := range g.tenants[p.Tenant] {
			if overlap(o.Methods, p.Methods) {
				return errorf("policies %s and %s both apply to %s for %s", o.ID, p.ID, g.endpoint, tenantText(p.Tenant))
			}
		}
		g.tenants[p.Tenant] = append(g.tenants[p.Tenant], p)
		if len(p.Methods) == 0 {
			g.anyMethod = true
		}
		for _, m := range p.Methods {
			if !slices.Contains(g.methods, m) {
				g.methods = append(g.methods, m)
			}
		}
	}
	t.byID[p.ID] = p
	t.ids = append(t.ids, p.ID)
	built := make([]Built, len(p.Tiers))
	for i, tier := range p.Tiers {
		built[i].Limiter, built[i].GCRA, _ = tier.Build() // validated
	}
	t.built[p] = built
	return nil
}

// A Built tier is ready to decide: a GCRA tier's parameters (Limiter nil),
// or another algorithm's Limiter. Limiters hold only their parameters and
// are safe for concurrent use.
type Built struct {
	Limiter engines.Limiter
	GCRA    gcra.Params
}

// Tiers returns p's tiers built, in order; p must be a policy of t. The
// caller must not change the slice.
func (t *Table) Tiers(p *Policy) []Built { return t.built[p] }

func tenantText(t string) string {
	if t == "" {
		return "any tenant"
	}
	return "tenant " + t
}

// overlap reports whether two method sets share a method (none: all).
func overlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, m := range a {
		if slices.Contains(b, m) {
			return true
		}
	}
	return false
}

func groupIn(m map[string]*group, endpoint string) *group {
	g := m[endpoint]
	if g == nil {
		g = &group{endpoint: endpoint, tenants: map[string][]*Policy{}}
		m[endpoint] = g
	}
	return g
}

// templateGroup is the group of the template's shape, made if new. The
// template has been validated.
func (t *Table) templateGroup(s string) *group {
	tmpl, _ := ParseTemplate(s)
	n := t.root
	for _, seg := range tmpl.segs {
		switch seg {
		case "**":
			if n.rest == nil {
				n.rest = &group{endpoint: tmpl.Shape(), tenants: map[string][]*Policy{}}
			}
			return n.rest
		case "*":
			if n.one == nil {
				n.one = &node{}
			}
			n = n.one
		default:
			if n.literal == nil {
				n.literal = map[string]*node{}
			}
			next := n.literal[seg]
			if next == nil {
				next = &node{}
				n.literal[seg] = next
			}
			n = next
		}
	}
	if n.end == nil {
		n.end = &group{endpoint: tmpl.Shape(), tenants: map[string][]*Policy{}}
	}
	return n.end
}

// lookup finds the most specific template group matching segs from
// position i whose policies cover the method.
func (n *node) lookup(segs []string, i int, method string) *group {
	if i < len(segs) {
		if next := n.literal[segs[i]]; next != nil {
			if g := next.lookup(segs, i+1, method); g != nil {
				return g
			}
		}
		if n.one != nil {
			if g := n.one.lookup(segs, i+1, method); g != nil {
				return g
			}
		}
	} else if n.end.coversAny(method) {
		return n.end
	}
	if n.rest.coversAny(method) {
		return n.rest
	}
	return nil
}

// Get returns the policy with the id.
func (t *Table) Get(id string) (*Policy, bool) {
	p, ok := t.byID[id]
	return p, ok
}

// Policies returns every policy, disabled ones too, in the order of their
// ids.
func (t *Table) Policies() []*Policy {
	ps := make([]*Policy, len(t.ids))
	for i, id := range t.ids {
		ps[i] = t.byID[id]
	}
	return ps
}

// Len is the number of policies.
func (t *Table) Len() int { return len(t.ids) }

// A Request is what a policy is resolved for. Target is a path ("/...")
// or a plain name; Method is upper case (ignored for a name).
type Request struct {
	Method string
	Target string
	Tenant string
}

// The steps of precedence, in order.
const (
	StepEndpointTenant = iota + 1 // the endpoint's policy for the tenant
	StepEndpointAny               // the endpoint's policy for any tenant
	StepDefaultTenant             // the default policy for the tenant
	StepDefaultAny                // the default policy for any tenant
	StepUnknownAny                // the UNKNOWN endpoint's policy
)

// A Candidate is a policy that applies to a request, at one step of the
// precedence.
type Candidate struct {
	Policy *Policy
	Step   int
}

func (t *Table) endpointGroup(r Request) *group {
	if !strings.HasPrefix(r.Target, "/") {
		if g := t.names[r.Target]; g != nil && g.coversAny(r.Method) {
			return g
		}
		return nil
	}
	var buf [16]string // most paths: no allocation
	segs, ok := AppendNormalized(buf[:0], r.Target)
	if !ok {
		return nil
	}
	return t.root.lookup(segs, 0, r.Method)
}

// Resolve returns the request's endpoint and the policies that apply to
// it in the order of precedence: (endpoint, tenant), (endpoint, any),
// (default, tenant), (default, any), (UNKNOWN, any). The first decides;
// the rest are what EXPLAIN shows. A request matching no template, or an
// invalid path, has the endpoint Unknown, so its first two steps are
// UNKNOWN's own. No candidate: no policy limits the request.
func (t *Table) Resolve(r Request) (endpoint string, cands []Candidate) {
	endpoint, steps := t.steps(r)
	for _, st := range steps {
		p := st.g.pick(st.tenant, r.Method)
		if p == nil || st.tenant == "" && st.forTenant {
			continue
		}
		if !slices.ContainsFunc(cands, func(c Candidate) bool { return c.Policy == p }) {
			cands = append(cands, Candidate{p, st.n})
		}
	}
	return endpoint, cands
}

// Decide is the policy that decides the request: Resolve's first
// candidate, or nil. It walks the same steps without listing them.
func (t *Table) Decide(r Request) (endpoint string, p *Policy) {
	endpoint, steps := t.steps(r)
	for _, st := range steps {
		if p := st.g.pick(st.tenant, r.Method); p != nil {
			return endpoint, p
		}
	}
	return endpoint, nil
}

// step is one step of the precedence: the group and tenant it looks in.
type step struct {
	g         *group
	tenant    string
	n         int  // Step...
	forTenant bool // a tenant's step: none when the request has no tenant
}

// steps are the request's endpoint and its steps of precedence, in order.
func (t *Table) steps(r Request) (string, [5]step) {
	g := t.endpointGroup(r)
	if g == nil {
		g = t.unknown
	}
	endpoint := Unknown
	if g != nil {
		endpoint = g.endpoint
	}
	return endpoint, [5]step{
		{g, r.Tenant, StepEndpointTenant, true},
		{g, "", StepEndpointAny, false},
		{t.def, r.Tenant, StepDefaultTenant, true},
		{t.def, "", StepDefaultAny, false},
		{t.unknown, "", StepUnknownAny, false},
	}
}
