package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The policy file: YAML in either of two shapes.
//
// The coordinated-microservices article's shape, a list of rules whose
// tiers are fixed windows of period seconds:
//
//	- id: get-product
//	  enabled: true
//	  methods: ['GET']
//	  pathPattern: /product/*
//	  tiers:
//	    - period: 10
//	      threshold: 1000
//
// and our own, a mapping whose policies may use every option and
// algorithm:
//
//	policies:
//	  - id: login
//	    path: /v1/login          # or pathPattern, name, fallback
//	    methods: [POST]
//	    tenant: acme
//	    shadow: false
//	    cost: 1
//	    principal: secret        # keys hold a keyed hash of the principal
//	    tiers:
//	      - {algorithm: cl, burst: 4, count: 5, period: 1s}
//	      - {algorithm: fwc, limit: 100, window: 1m}
//
// Times are seconds when a number, or a duration ("500ms", "10s", "1m",
// "1h") in whole milliseconds. Every field is checked; an unknown field, a
// bad value or a policy that does not validate refuses the whole file with
// its line.

// Parse reads a policy file. The policies are validated one by one; New
// checks them as a set.
func Parse(data []byte) ([]Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file: no policies
	}
	root := doc.Content[0]
	list := root
	if root.Kind == yaml.MappingNode {
		list = nil
		for i := 0; i+1 < len(root.Content); i += 2 {
			switch k, v := root.Content[i], root.Content[i+1]; k.Value {
			case "policies":
				list = v
			default:
				return nil, lineErr(k, "unknown field %q (want policies)", k.Value)
			}
		}
		if list == nil {
			return nil, lineErr(root, "no policies")
		}
	}
	if list.Kind != yaml.SequenceNode {
		if list.Tag == "!!null" {
			return nil, nil
		}
		return nil, lineErr(list, "want a list of policies")
	}
	if len(list.Content) > MaxPolicies {
		return nil, lineErr(list, "%d policies; at most %d", len(list.Content), MaxPolicies)
	}
	ps := make([]Policy, 0, len(list.Content))
	for _, n := range list.Content {
		p, err := parsePolicy(n)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// ParseOne reads one policy, a YAML (or JSON) mapping, as POLICY SET gives
// it, and validates it.
func ParseOne(data []byte) (Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Policy{}, errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return Policy{}, errorf("no policy given")
	}
	return parsePolicy(doc.Content[0])
}

func lineErr(n *yaml.Node, format string, args ...any) error {
	return errorf("line %d: "+format, append([]any{n.Line}, args...)...)
}

func parsePolicy(n *yaml.Node) (Policy, error) {
	var p Policy
	if n.Kind != yaml.MappingNode {
		return p, lineErr(n, "a policy is a mapping of fields")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return p, lineErr(k, "field %q given twice", k.Value)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "id":
			p.ID, err = str(v)
		case "path", "pathPattern":
			if seen["path"] && seen["pathPattern"] {
				return p, lineErr(k, "give path or pathPattern, not both")
			}
			p.Path, err = str(v)
		case "name":
			p.Name, err = str(v)
		case "fallback":
			p.Fallback, err = str(v)
		case "methods":
			p.Methods, err = methods(v)
		case "tenant":
			p.Tenant, err = str(v)
		case "enabled":
			var on bool
			on, err = boolean(v)
			p.Disabled = !on
		case "shadow":
			p.Shadow, err = boolean(v)
		case "cost":
			p.Cost, err = integer(v)
		case "principal":
			var s string
			s, err = str(v)
			switch {
			case err != nil:
			case s == "secret":
				p.SecretPrincipal = true
			case s != "plain":
				err = fmt.Errorf("principal is secret or plain, not %q", s)
			}
		case "tiers":
			p.Tiers, err = tiers(v)
		default:
			return p, lineErr(k, "unknown field %q", k.Value)
		}
		if err != nil {
			if errors.Is(err, ErrInvalid) {
				return p, err // a tier's error, with its own line
			}
			return p, lineErr(v, "%s: %v", k.Value, err)
		}
	}
	if err := p.Validate(); err != nil {
		return p, lineErr(n, "%s", reason(err))
	}
	return p, nil
}

func tiers(n *yaml.Node) ([]Tier, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("want a list of tiers")
	}
	if len(n.Content) > MaxTiers {
		return nil, fmt.Errorf("more than %d tiers", MaxTiers)
	}
	ts := make([]Tier, 0, len(n.Content))
	for _, tn := range n.Content {
		t, err := tier(tn)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// tierFields are the fields each algorithm takes, beside algorithm.
var tierFields = map[string][]string{
	"":   {"period", "threshold"}, // the article's fixed window
	GCRA: {"burst", "count", "period"},
	FWC:  {"limit", "window"},
	SWL:  {"limit", "window"},
	SWC:  {"limit", "window", "subwindows"},
	TB:   {"capacity", "refill", "period"},
	LB:   {"capacity", "leak", "period"},
}

func tier(n *yaml.Node) (Tier, error) {
	var t Tier
	if n.Kind != yaml.MappingNode {
		return t, lineErr(n, "a tier is a mapping of fields")
	}
	fields := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if _, dup := fields[k.Value]; dup {
			return t, lineErr(k, "field %q given twice", k.Value)
		}
		fields[k.Value] = n.Content[i+1]
	}
	if a, ok := fields["algorithm"]; ok {
		s, err := str(a)
		if err != nil {
			return t, lineErr(a, "algorithm: %v", err)
		}
		t.Algorithm = strings.ToLower(s)
		delete(fields, "algorithm")
	}
	want, ok := tierFields[t.Algorithm]
	if !ok {
		return t, lineErr(n, "unknown algorithm %q (use cl, fwc, swl, swc, tb or lb)", t.Algorithm)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Value != "algorithm" && !contains(want, k.Value) {
			return t, lineErr(k, "unknown field %q for %s (want %s)", k.Value, algoText(t.Algorithm), strings.Join(want, ", "))
		}
	}
	for _, f := range want {
		v, ok := fields[f]
		if !ok {
			if f == "subwindows" {
				continue
			}
			return t, lineErr(n, "%s needs %s", algoText(t.Algorithm), f)
		}
		var err error
		switch f {
		case "period", "window":
			t.Period, err = duration(v)
		case "threshold", "limit":
			t.Limit, err = integer(v)
		case "burst", "capacity":
			t.Burst, err = integer(v)
		case "count", "refill", "leak":
			t.Count, err = integer(v)
		case "subwindows":
			t.Subwindows, err = integer(v)
		}
		if err != nil {
			return t, lineErr(v, "%s: %v", f, err)
		}
	}
	if t.Algorithm == "" {
		t.Algorithm = FWC
	}
	if err := t.Validate(); err != nil {
		return t, lineErr(n, "%s", reason(err))
	}
	return t, nil
}

func algoText(a string) string {
	if a == "" {
		return "a tier without algorithm (a fixed window)"
	}
	return a
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func str(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", fmt.Errorf("want a string")
	}
	return n.Value, nil
}

func boolean(n *yaml.Node) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, fmt.Errorf("want true or false")
	}
	return strconv.ParseBool(strings.ToLower(n.Value))
}

func integer(n *yaml.Node) (int64, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, fmt.Errorf("want an integer")
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer that fits 64 bits")
	}
	return v, nil
}

func methods(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("want a list of methods")
	}
	if len(n.Content) > MaxMethods {
		return nil, fmt.Errorf("more than %d methods", MaxMethods)
	}
	var ms []string
	for _, m := range n.Content {
		s, err := str(m)
		if err != nil {
			return nil, err
		}
		s = strings.ToUpper(s)
		if !contains(ms, s) {
			ms = append(ms, s)
		}
	}
	return ms, nil
}

// duration is a time in ms: a number of seconds, or a duration text in
// whole milliseconds.
func duration(n *yaml.Node) (int64, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		s, err := integer(n)
		if err != nil {
			return 0, err
		}
		if s <= 0 || s > 1<<40 {
			return 0, fmt.Errorf("want a positive number of seconds")
		}
		return s * 1000, nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return 0, fmt.Errorf("want seconds or a duration such as 500ms, 10s, 1m")
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("want a positive duration in whole milliseconds, such as 500ms, 10s, 1m")
	}
	return d.Milliseconds(), nil
}

// Marshal is the policy in the canonical form POLICY GET shows and the
// store keeps: one line of JSON in our own shape (which ParseOne reads
// back as the same policy), fields in a fixed order, defaults left out.
func Marshal(p *Policy) []byte {
	type tierJSON struct {
		Algorithm  string `json:"algorithm"`
		Limit      int64  `json:"limit,omitempty"`
		Burst      *int64 `json:"burst,omitempty"`
		Capacity   int64  `json:"capacity,omitempty"`
		Count      int64  `json:"count,omitempty"`
		Refill     int64  `json:"refill,omitempty"`
		Leak       int64  `json:"leak,omitempty"`
		Period     string `json:"period,omitempty"`
		Window     string `json:"window,omitempty"`
		Subwindows int64  `json:"subwindows,omitempty"`
	}
	type policyJSON struct {
		ID        string     `json:"id"`
		Path      string     `json:"path,omitempty"`
		Methods   []string   `json:"methods,omitempty"`
		Name      string     `json:"name,omitempty"`
		Fallback  string     `json:"fallback,omitempty"`
		Tenant    string     `json:"tenant,omitempty"`
		Enabled   bool       `json:"enabled"`
		Shadow    bool       `json:"shadow,omitempty"`
		Cost      int64      `json:"cost,omitempty"`
		Principal string     `json:"principal,omitempty"`
		Tiers     []tierJSON `json:"tiers"`
	}
	out := policyJSON{ID: p.ID, Path: p.Path, Methods: p.Methods, Name: p.Name, Fallback: p.Fallback,
		Tenant: p.Tenant, Enabled: !p.Disabled, Shadow: p.Shadow, Cost: p.Cost}
	if p.SecretPrincipal {
		out.Principal = "secret"
	}
	for _, t := range p.Tiers {
		d := (time.Duration(t.Period) * time.Millisecond).String()
		tj := tierJSON{Algorithm: t.Algorithm}
		switch t.Algorithm {
		case GCRA:
			burst := t.Burst
			tj.Burst, tj.Count, tj.Period = &burst, t.Count, d
		case FWC, SWL, SWC:
			tj.Limit, tj.Window, tj.Subwindows = t.Limit, d, t.Subwindows
		case TB:
			tj.Capacity, tj.Refill, tj.Period = t.Burst, t.Count, d
		case LB:
			tj.Capacity, tj.Leak, tj.Period = t.Burst, t.Count, d
		}
		out.Tiers = append(out.Tiers, tj)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err) // only plain values: cannot fail
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
