package policy

import (
	"reflect"
	"strings"
	"testing"
)

// The coordinated-microservices article's example, as it is.
const article = `
- id: get-product
  enabled: true
  methods: ['GET']
  pathPattern: /product/*
  tiers:
    - period: 10      # seconds
      threshold: 1000
`

func TestParse_Article(t *testing.T) {
	ps, err := Parse([]byte(article))
	if err != nil {
		t.Fatal(err)
	}
	want := []Policy{{ID: "get-product", Methods: []string{"GET"}, Path: "/product/*",
		Tiers: []Tier{{Algorithm: FWC, Limit: 1000, Period: 10000}}}}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("got %+v\nwant %+v", ps, want)
	}
}

const ours = `
policies:
  - id: login
    path: /v1/login
    methods: [post]
    tenant: acme
    shadow: true
    cost: 2
    principal: secret
    tiers:
      - {algorithm: cl, burst: 4, count: 5, period: 1s}
      - {algorithm: fwc, limit: 100, window: 1m}
  - id: orgs
    pathPattern: /v1/orgs/{org}/product/{id}
    tiers:
      - {algorithm: swl, limit: 10, window: 500ms}
      - {algorithm: swc, limit: 10, window: 10, subwindows: 5}
      - {algorithm: tb, capacity: 100, refill: 80, period: 1m}
      - {algorithm: LB, capacity: 10, leak: 1, period: 100ms}
  - id: jobs
    name: batch-jobs
    enabled: false
    tiers: [{algorithm: fwc, limit: 5, window: 1h}]
  - id: everything-else
    fallback: default
    tiers: [{period: 1, threshold: 50}]
  - id: unknown
    fallback: unknown
    tiers: [{algorithm: cl, burst: 0, count: 1, period: 1}]
`

func TestParse_Ours(t *testing.T) {
	ps, err := Parse([]byte(ours))
	if err != nil {
		t.Fatal(err)
	}
	want := []Policy{
		{ID: "login", Path: "/v1/login", Methods: []string{"POST"}, Tenant: "acme", Shadow: true, Cost: 2, SecretPrincipal: true,
			Tiers: []Tier{{Algorithm: GCRA, Burst: 4, Count: 5, Period: 1000}, {Algorithm: FWC, Limit: 100, Period: 60000}}},
		{ID: "orgs", Path: "/v1/orgs/{org}/product/{id}", Tiers: []Tier{
			{Algorithm: SWL, Limit: 10, Period: 500},
			{Algorithm: SWC, Limit: 10, Period: 10000, Subwindows: 5},
			{Algorithm: TB, Burst: 100, Count: 80, Period: 60000},
			{Algorithm: LB, Burst: 10, Count: 1, Period: 100}}},
		{ID: "jobs", Name: "batch-jobs", Disabled: true, Tiers: []Tier{{Algorithm: FWC, Limit: 5, Period: 3600000}}},
		{ID: "everything-else", Fallback: Default, Tiers: []Tier{{Algorithm: FWC, Limit: 50, Period: 1000}}},
		{ID: "unknown", Fallback: Unknown, Tiers: []Tier{{Algorithm: GCRA, Burst: 0, Count: 1, Period: 1000}}},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("got %+v\nwant %+v", ps, want)
	}
	if _, err := New(ps); err != nil {
		t.Error(err)
	}
	// Marshal's form reads back as the same policy.
	for i := range ps {
		back, err := ParseOne(Marshal(&ps[i]))
		if err != nil || !reflect.DeepEqual(back, ps[i]) {
			t.Errorf("%s: %s read back as %+v, %v", ps[i].ID, Marshal(&ps[i]), back, err)
		}
	}
	if got, want := string(Marshal(&ps[0])), `{"id":"login","path":"/v1/login","methods":["POST"],"tenant":"acme","enabled":true,"shadow":true,"cost":2,"principal":"secret","tiers":[{"algorithm":"cl","burst":4,"count":5,"period":"1s"},{"algorithm":"fwc","limit":100,"window":"1m0s"}]}`; got != want {
		t.Errorf("Marshal = %s\nwant %s", got, want)
	}
}

// TestParse_Errors: a bad file is refused whole, with the line and the
// reason.
func TestParse_Errors(t *testing.T) {
	tests := []struct{ file, want string }{
		{"- id: a\n  path: /x\n  tierz: []\n", `line 3: unknown field "tierz"`},
		{"- id: a\n  path: /x\n  tiers:\n    - {period: 0, threshold: 1}\n", "line 4: period: want a positive number of seconds"},
		{"- id: a\n  path: /x\n  tiers:\n    - {period: 1.5, threshold: 1}\n", "line 4: period: want seconds or a duration"},
		{"- id: a\n  path: /x\n  tiers:\n    - {algorithm: cl, burst: 1, period: 1}\n", "line 4: cl needs count"},
		{"- id: a\n  path: /x\n  tiers:\n    - {algorithm: tb, limit: 1, window: 1}\n", `line 4: unknown field "limit" for tb`},
		{"- id: a\n  path: /x\n  tiers:\n    - {algorithm: fwc, limit: 1, window: 1500us}\n", "whole milliseconds"},
		{"- id: a\n  path: x\n  tiers: [{period: 1, threshold: 1}]\n", `line 1: policy a: "x" does not start with /`},
		{"- id: a\n  path: /x\n  enabled: maybe\n  tiers: [{period: 1, threshold: 1}]\n", "line 3: enabled: want true or false"},
		{"- id: a\n  id: b\n", `line 2: field "id" given twice`},
		{"- id: a\n  path: /x\n  pathPattern: /y\n", "path or pathPattern"},
		{"- id: a\n  path: /x\n  principal: hashed\n  tiers: [{period: 1, threshold: 1}]\n", "principal is secret or plain"},
		{"rules: []\n", `line 1: unknown field "rules"`},
		{"just text\n", "want a list of policies"},
		{"- [1, 2]\n", "line 1: a policy is a mapping"},
		{"- id: a\n  path: /x\n  tiers: [{period: 1, threshold: 99999999999999999999}]\n", "line 3: threshold: want an integer"},
		{"- id: a\n\tpath: /x\n", "line 2"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error with %q", tt.file, err, tt.want)
		}
	}
	for _, empty := range []string{"", "# nothing\n", "policies:\n", "[]\n"} {
		if ps, err := Parse([]byte(empty)); err != nil || len(ps) != 0 {
			t.Errorf("%q: %v, %v; want no policies", empty, ps, err)
		}
	}
}

// FuzzParse: the loader never panics; what it accepts validates, builds a
// table or is refused as a set, and reads back from Marshal's form as
// itself.
func FuzzParse(f *testing.F) {
	f.Add(article)
	f.Add(ours)
	f.Add("- id: a\n  path: /x/{y}\n  tiers: [{algorithm: swc, limit: 3, window: 2s, subwindows: 2}]\n")
	f.Fuzz(func(t *testing.T, file string) {
		ps, err := Parse([]byte(file))
		if err != nil {
			return
		}
		for i := range ps {
			if err := ps[i].Validate(); err != nil {
				t.Fatalf("accepted an invalid policy: %v", err)
			}
			back, err := ParseOne(Marshal(&ps[i]))
			if err != nil || !reflect.DeepEqual(back, ps[i]) {
				t.Fatalf("%s read back as %+v, %v", Marshal(&ps[i]), back, err)
			}
		}
		New(ps)
	})
}
