package policy

import (
	"fmt"
	"strings"
	"testing"
)

func fwc(limit int64) []Tier { return []Tier{{Algorithm: FWC, Limit: limit, Period: 1000}} }

// TestResolve_Precedence walks every combination of the five kinds of
// policy that can apply (the endpoint's for the tenant and for any, the
// default's for the tenant and for any, UNKNOWN's), for a request that
// reaches the endpoint and one that reaches nothing, with and without a
// tenant, and checks the decider and the whole candidate order against
// the rule written out.
func TestResolve_Precedence(t *testing.T) {
	kinds := []Policy{
		{ID: "ep-tenant", Path: "/v1/items/{id}", Tenant: "acme", Tiers: fwc(1)},
		{ID: "ep-any", Path: "/v1/items/*", Tiers: fwc(2)},
		{ID: "def-tenant", Fallback: Default, Tenant: "acme", Tiers: fwc(3)},
		{ID: "def-any", Fallback: Default, Tiers: fwc(4)},
		{ID: "unk-any", Fallback: Unknown, Tiers: fwc(5)},
	}
	// A template for another tenant, so that /v1/items/x is a known
	// endpoint even when neither ep-* policy is present.
	other := Policy{ID: "ep-other", Path: "/v1/items/*", Tenant: "zeta", Tiers: fwc(6)}
	for mask := 0; mask < 1<<len(kinds); mask++ {
		ps := []Policy{other}
		present := map[string]bool{}
		for i, k := range kinds {
			if mask&(1<<i) != 0 {
				ps = append(ps, k)
				present[k.ID] = true
			}
		}
		table, err := New(ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"/v1/items/42", "/nowhere/at/all"} {
			for _, tenant := range []string{"acme", "", "other"} {
				known := target == "/v1/items/42"
				var want []string
				add := func(id string, ok bool) {
					if ok && present[id] {
						for _, w := range want {
							if w == id {
								return
							}
						}
						want = append(want, id)
					}
				}
				if known {
					add("ep-tenant", tenant == "acme")
					add("ep-any", true)
				} else {
					add("unk-any", true) // UNKNOWN is the endpoint
				}
				add("def-tenant", tenant == "acme")
				add("def-any", true)
				add("unk-any", true)

				endpoint, cands := table.Resolve(Request{Method: "GET", Target: target, Tenant: tenant})
				var got []string
				for _, c := range cands {
					got = append(got, c.Policy.ID)
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("mask %05b %s tenant %q: candidates %v, want %v", mask, target, tenant, got, want)
				}
				wantEndpoint := Unknown
				if known {
					wantEndpoint = "/v1/items/*"
				}
				if endpoint != wantEndpoint {
					t.Errorf("mask %05b %s: endpoint %q, want %q", mask, target, endpoint, wantEndpoint)
				}
				// Decide is Resolve's first candidate, found without the list.
				dEndpoint, p := table.Decide(Request{Method: "GET", Target: target, Tenant: tenant})
				if dEndpoint != endpoint || (p == nil) != (len(want) == 0) || p != nil && p.ID != want[0] {
					t.Errorf("mask %05b %s tenant %q: Decide %q %v, Resolve %q %v", mask, target, tenant, dEndpoint, p, endpoint, got)
				}
			}
		}
	}
}

// TestResolve_Specificity: the most specific template wins, segment by
// segment, whatever order the policies were given in; methods narrow the
// match.
func TestResolve_Specificity(t *testing.T) {
	ps := []Policy{
		{ID: "rest", Path: "/a/**", Tiers: fwc(1)},
		{ID: "one", Path: "/a/*", Tiers: fwc(1)},
		{ID: "lit", Path: "/a/b", Tiers: fwc(1)},
		{ID: "deep", Path: "/a/*/c", Tiers: fwc(1)},
		{ID: "deeplit", Path: "/a/b/*", Tiers: fwc(1)},
		{ID: "post", Path: "/p/{x}", Methods: []string{"POST"}, Tiers: fwc(1)},
		{ID: "get", Path: "/p/*", Methods: []string{"GET", "HEAD"}, Tiers: fwc(1)},
		{ID: "prest", Path: "/p/**", Methods: []string{"DELETE"}, Tiers: fwc(1)},
		{ID: "root", Path: "/", Tiers: fwc(1)},
		{ID: "named", Name: "login-attempts", Tiers: fwc(1)},
	}
	tests := []struct{ method, target, want string }{
		{"GET", "/a/b", "lit"},
		{"GET", "/a/z", "one"},
		{"GET", "/a", "rest"},
		{"GET", "/a/z/y", "rest"},
		{"GET", "/a/z/c", "deep"},
		{"GET", "/a/b/c", "deeplit"},
		{"GET", "/a//b/", "lit"},
		{"POST", "/p/1", "post"},
		{"GET", "/p/1", "get"},
		{"HEAD", "/p/1", "get"},
		{"PUT", "/p/1", ""},
		{"DELETE", "/p/1", "prest"},
		{"GET", "/", "root"},
		{"GET", "/zzz", ""},
		{"GET", "login-attempts", "named"},
		{"GET", "login", ""},
		{"GET", "/a/%zz", ""},
	}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}} {
		var given []Policy
		for _, i := range order {
			given = append(given, ps[i])
		}
		table, err := New(given)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			_, p := table.Decide(Request{Method: tt.method, Target: tt.target})
			got := ""
			if p != nil {
				got = p.ID
			}
			if got != tt.want {
				t.Errorf("order %v: %s %s -> %q, want %q", order, tt.method, tt.target, got, tt.want)
			}
		}
	}
}

func TestNew_Refuses(t *testing.T) {
	tests := []struct {
		ps   []Policy
		want string
	}{
		{[]Policy{{ID: "a", Path: "/x/*", Tiers: fwc(1)}, {ID: "a", Path: "/y", Tiers: fwc(1)}}, "used twice"},
		{[]Policy{{ID: "a", Path: "/x/*", Tiers: fwc(1)}, {ID: "b", Path: "/x/{id}", Tiers: fwc(1)}}, "both apply to /x/*"},
		{[]Policy{{ID: "a", Path: "/x", Methods: []string{"GET"}, Tiers: fwc(1)}, {ID: "b", Path: "/x", Tiers: fwc(1)}}, "both apply"},
		{[]Policy{{ID: "a", Fallback: Default, Tiers: fwc(1)}, {ID: "b", Fallback: Default, Tiers: fwc(1)}}, "both apply to default"},
		{[]Policy{{ID: "a", Path: "/x", Tiers: nil}}, "no tiers"},
		{[]Policy{{ID: "a", Path: "/x", Name: "y", Tiers: fwc(1)}}, "exactly one of"},
		{[]Policy{{ID: "a b", Path: "/x", Tiers: fwc(1)}}, "only letters"},
		{[]Policy{{ID: "a", Fallback: "other", Tiers: fwc(1)}}, "fallback is"},
		{[]Policy{{ID: "a", Name: "n", Methods: []string{"GET"}, Tiers: fwc(1)}}, "methods go with a path"},
		{[]Policy{{ID: "a", Path: "/x", Methods: []string{"get"}, Tiers: fwc(1)}}, "upper-case"},
		{[]Policy{{ID: "a", Path: "/x", Tiers: []Tier{{Algorithm: "xx", Limit: 1, Period: 1}}}}, "unknown algorithm"},
		{[]Policy{{ID: "a", Path: "/x", Tiers: []Tier{{Algorithm: GCRA, Count: 0, Period: 1}}}}, "count must be positive"},
		{[]Policy{{ID: "a", Path: "/x", Tiers: []Tier{{Algorithm: FWC, Limit: 1, Period: 0}}}}, "period"},
		{[]Policy{{ID: "a", Path: "/x", Cost: -1, Tiers: fwc(1)}}, "cost"},
	}
	for _, tt := range tests {
		_, err := New(tt.ps)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error with %q", tt.ps, err, tt.want)
		}
	}
	// Disjoint methods and other tenants share a template; a disabled
	// policy conflicts with nothing.
	_, err := New([]Policy{
		{ID: "a", Path: "/x", Methods: []string{"GET"}, Tiers: fwc(1)},
		{ID: "b", Path: "/x", Methods: []string{"POST"}, Tiers: fwc(1)},
		{ID: "c", Path: "/x", Tenant: "t", Tiers: fwc(1)},
		{ID: "d", Path: "/x", Disabled: true, Tiers: fwc(1)},
	})
	if err != nil {
		t.Error(err)
	}
	many := make([]Policy, MaxPolicies+1)
	for i := range many {
		many[i] = Policy{ID: fmt.Sprint("p", i), Path: fmt.Sprint("/p/", i), Tiers: fwc(1)}
	}
	if _, err := New(many); err == nil {
		t.Errorf("%d policies accepted", len(many))
	}
	if _, err := New(many[:MaxPolicies]); err != nil {
		t.Errorf("%d policies: %v", MaxPolicies, err)
	}
}

// TestResolve_Disabled: a disabled policy matches nothing, so the request
// falls to the next step.
func TestResolve_Disabled(t *testing.T) {
	table, err := New([]Policy{
		{ID: "off", Path: "/x", Tenant: "acme", Disabled: true, Tiers: fwc(1)},
		{ID: "on", Path: "/x", Tiers: fwc(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, p := table.Decide(Request{Method: "GET", Target: "/x", Tenant: "acme"}); p == nil || p.ID != "on" {
		t.Errorf("decided by %v, want on", p)
	}
	if p, ok := table.Get("off"); !ok || !p.Disabled {
		t.Errorf("Get(off) = %v, %v", p, ok)
	}
	if table.Len() != 2 || table.Policies()[0].ID != "off" {
		t.Errorf("Policies() = %v", table.Policies())
	}
}
