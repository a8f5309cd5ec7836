package commands

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/policy"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// Rate-limit policies held in the store (package policy has the model).
//
// Each policy is a key of the store's system database, named by its id and
// holding the policy's canonical JSON (policy.Marshal): a string like any
// other, so POLICY SET and DEL go through the one apply path. A single node
// persists them, a Raft cluster agrees on them in its log, and a mesh
// converges on them as on every string: each policy is a last-writer-wins
// register of its own, so concurrent changes of two policies both survive
// and concurrent changes of one policy end with the later write's.
//
// The registry hears every change of the system database (SetSystemWatch)
// and compiles the set into a policy.Table when a decision next asks for
// it. A set that replicas converged on may hold two policies that conflict
// (two nodes each added one for the same endpoint and tenant): it is built
// with policy.Build, which leaves out the later of the two in id order, the
// same on every node, and logs it.

// policyRegistry holds the compiled policy table of a server.
type policyRegistry struct {
	log *slog.Logger

	mu  sync.Mutex        // guards raw
	raw map[string][]byte // id -> the policy's stored JSON
	// dirty: raw changed since table was built. Set with mu held; read
	// without it first, so a decision takes no lock when nothing changed.
	dirty atomic.Bool

	table atomic.Pointer[policy.Table]
	// loading counts POLICY LOADs writing the set: meanwhile the table is
	// not rebuilt, so no decision sees half of a new set.
	loading atomic.Int32

	// stats are each policy's decision counters (id -> *PolicyStats),
	// kept while the policy is in the table: bounded by
	// policy.MaxPolicies, never per principal. A sync.Map: a decision
	// counts without a lock shared by every connection.
	stats sync.Map
}

// PolicyStats are one policy's decisions since the start: calls allowed,
// calls refused, and calls a shadow policy would have refused (and let
// through). Probes and EXPLAIN are not counted.
type PolicyStats struct {
	Allowed, Limited, ShadowLimited atomic.Int64
}

// count records a decision of p.
func (r *policyRegistry) count(id string, limited, shadowed bool) {
	v, ok := r.stats.Load(id)
	if !ok {
		v, _ = r.stats.LoadOrStore(id, &PolicyStats{})
	}
	st := v.(*PolicyStats)
	switch {
	case shadowed:
		st.ShadowLimited.Add(1)
	case limited:
		st.Limited.Add(1)
	default:
		st.Allowed.Add(1)
	}
}

// PolicyStats calls fn with the counters of every policy in the table that
// has decided a call, in id order.
func (s *Server) PolicyStats(fn func(id string, st *PolicyStats)) {
	t := s.policies.Table()
	r := s.policies
	for _, p := range t.Policies() {
		if st, ok := r.stats.Load(p.ID); ok {
			fn(p.ID, st.(*PolicyStats))
		}
	}
	r.stats.Range(func(id, _ any) bool {
		if _, ok := t.Get(id.(string)); !ok {
			r.stats.Delete(id) // the policy is gone
		}
		return true
	})
}

func newPolicyRegistry(st *store.Store, log *slog.Logger) *policyRegistry {
	r := &policyRegistry{log: log, raw: map[string][]byte{}}
	empty, _ := policy.New(nil)
	r.table.Store(empty)
	st.SetSystemWatch(r.watch)
	// What the store already holds (a folder loaded before the server).
	var all store.LockSet
	all.AddAll()
	st.Lock(&all)
	st.Tx(0).ForEach(st.SystemDB(), func(key string, v store.Value, _ int64) bool {
		r.watch([]byte(key), v, true)
		return true
	})
	st.Unlock(&all)
	return r
}

// watch is the store's system watch: it records a policy's new JSON or its
// removal (a nil key: every policy removed).
func (r *policyRegistry) watch(key []byte, v store.Value, present bool) {
	var text []byte
	if present {
		text = v.Bytes
		if v.Kind == store.KindMerged { // a mesh string
			s, err := mstate.StrGet(v.Bytes, 0)
			if err != nil {
				return
			}
			present, text = s.Exists, s.Bytes
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty.Store(true)
	switch {
	case key == nil:
		clear(r.raw)
	case present:
		r.raw[string(key)] = slices.Clone(text)
	default:
		delete(r.raw, string(key))
	}
}

// Table is the current policy table, built again if the policies changed.
func (r *policyRegistry) Table() *policy.Table {
	if !r.dirty.Load() || r.loading.Load() > 0 {
		return r.table.Load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dirty.Load() {
		return r.table.Load()
	}
	ids := make([]string, 0, len(r.raw))
	for id := range r.raw {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ps := make([]policy.Policy, 0, len(ids))
	for _, id := range ids {
		p, err := policy.ParseOne(r.raw[id])
		if err != nil || p.ID != id {
			r.log.Error("a stored policy does not load; left out", "id", id, "err", err)
			continue
		}
		ps = append(ps, p)
	}
	t, errs := policy.Build(ps)
	for _, err := range errs {
		r.log.Error("conflicting policies; the later id is left out", "err", err)
	}
	r.table.Store(t)
	r.dirty.Store(false)
	return t
}

// infoPolicies appends INFO's Policies section: how many policies there
// are, and each one's decisions (as throttled_policy_decisions_total).
func (s *Server) infoPolicies(b []byte) []byte {
	b = append(b, "# Policies\r\n"...)
	b = fmt.Appendf(b, "policies:%d\r\n", s.policies.Table().Len())
	s.PolicyStats(func(id string, st *PolicyStats) {
		b = fmt.Appendf(b, "policy_%s:allowed=%d,limited=%d,shadow_limited=%d\r\n",
			id, st.Allowed.Load(), st.Limited.Load(), st.ShadowLimited.Load())
	})
	return b
}

// inDB runs fn with the connection's database set to db: the string
// helpers (putString, deleteKey) then write there.
func (c *Ctx) inDB(db int, fn func()) {
	saved := c.st.db
	c.st.db = db
	defer func() { c.st.db = saved }()
	fn()
}

const policyHelp = `POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:
SET <policy>
    Add or replace a policy, given as one YAML or JSON mapping with its id.
GET <id>
    Return the policy's canonical JSON, or nil.
DEL <id> [<id> ...]
    Remove policies; return how many there were.
LIST
    Return every policy's JSON, in the order of their ids.
LOAD <file text>
    Replace every policy with those of a policy file's text (YAML).
RELOAD
    Replace every policy with those of the server's --policy-file.
HELP
    Print this help.`

// POLICY SET|GET|DEL|LIST|HELP: the policies, kept in the system database.
// The command locks every shard, so changes of the set are serialized and
// a decision never sees half of one.
func policyCmd(c *Ctx) {
	sub := strings.ToUpper(string(c.Args[1]))
	args := c.Args[2:]
	reg := c.srv.policies
	switch {
	case sub == "HELP" && len(args) == 0:
		lines := strings.Split(policyHelp, "\n")
		c.W.Array(len(lines))
		for _, l := range lines {
			c.W.Status(l)
		}
	case sub == "SET" && len(args) == 1:
		p, err := policy.ParseOne(args[0])
		if err != nil {
			c.W.Error("ERR " + policyError(err))
			return
		}
		t := reg.Table()
		ps := []policy.Policy{p}
		for _, o := range t.Policies() {
			if o.ID != p.ID {
				ps = append(ps, *o)
			}
		}
		if _, err := policy.New(ps); err != nil {
			c.W.Error("ERR " + policyError(err))
			return
		}
		c.inDB(c.srv.store.SystemDB(), func() { c.putString([]byte(p.ID), policy.Marshal(&p), 0, false) })
		c.W.OK()
	case sub == "GET" && len(args) == 1:
		p, ok := reg.Table().Get(string(args[0]))
		if !ok {
			c.W.Null()
			return
		}
		c.W.Bulk(policy.Marshal(p))
	case sub == "DEL" && len(args) >= 1:
		n := 0
		c.inDB(c.srv.store.SystemDB(), func() {
			for _, id := range args {
				if c.deleteKey(id) {
					n++
				}
			}
		})
		c.W.Int(int64(n))
	case sub == "LOAD" && len(args) == 1:
		n, errText := c.loadPolicies(args[0])
		if errText != "" {
			c.W.Error(errText)
			return
		}
		c.W.Int(int64(n))
	case sub == "LIST" && len(args) == 0:
		ps := reg.Table().Policies()
		c.W.Array(len(ps))
		for _, p := range ps {
			c.W.Bulk(policy.Marshal(p))
		}
	case sub == "RELOAD":
		// Only a POLICY RELOAD that policyPrepare refused gets here.
		c.W.Error("ERR wrong number of arguments for 'policy|reload' command")
	case sub == "SET" || sub == "GET" || sub == "DEL" || sub == "LIST" || sub == "LOAD" || sub == "HELP":
		c.W.Error("ERR wrong number of arguments for 'policy|" + strings.ToLower(sub) + "' command")
	default:
		c.W.Error("ERR unknown subcommand '" + sanitize(string(c.Args[1]), 128) + "'. Try POLICY HELP.")
	}
}

// policyPrepare turns POLICY RELOAD into POLICY LOAD with the text of the
// policy file, read here, on the node the client asked.
func policyPrepare(s *Server, args [][]byte) ([][]byte, string) {
	if !is(args[1], "RELOAD") || len(args) != 2 {
		return args, ""
	}
	text, errText := s.policyFileText()
	if errText != "" {
		return nil, errText
	}
	return [][]byte{args[0], []byte("LOAD"), text}, ""
}

// policyFileText reads --policy-file; an error is the reply text.
func (s *Server) policyFileText() ([]byte, string) {
	if s.cfg.PolicyFile == "" {
		return nil, "ERR no policy file: start the server with --policy-file"
	}
	text, err := os.ReadFile(s.cfg.PolicyFile)
	if err != nil {
		return nil, "ERR cannot read the policy file: " + err.Error()
	}
	return text, ""
}

// LoadPolicyFile loads --policy-file on this node, as POLICY RELOAD would:
// a single node and a mesh node call it at start, before serving. It
// returns how many policies the file holds.
func (s *Server) LoadPolicyFile() (int, error) {
	text, errText := s.policyFileText()
	if errText == "" {
		var w resp.Writer
		w.Reset(2)
		st := &connState{user: s.acl.def}
		args := [][]byte{[]byte("POLICY"), []byte("LOAD"), text}
		s.execute(nil, &w, st, s.cmds["policy"], args, s.instant(time.Now()), time.Now())
		reply := string(w.Bytes())
		if !strings.HasPrefix(reply, "-") {
			n, _ := strconv.Atoi(strings.TrimSpace(reply[1:]))
			return n, nil
		}
		errText = strings.TrimSpace(reply[1:])
	}
	return 0, fmt.Errorf("%s: %s", s.cfg.PolicyFile, strings.TrimPrefix(errText, "ERR "))
}

// loadPolicies replaces every policy with those of a policy file's text,
// all or nothing: a file that does not load changes nothing. Policies whose
// JSON is unchanged are not written again. It returns how many policies
// the set now holds; an error is the reply text.
func (c *Ctx) loadPolicies(text []byte) (int, string) {
	ps, err := policy.Parse(text)
	if err == nil {
		_, err = policy.New(ps)
	}
	if err != nil {
		return 0, "ERR invalid policy file: " + strings.TrimPrefix(err.Error(), policy.ErrInvalid.Error()+": ")
	}
	old := c.srv.policies.Table()
	c.srv.policies.loading.Add(1)
	defer c.srv.policies.loading.Add(-1)
	c.inDB(c.srv.store.SystemDB(), func() {
		keep := map[string]bool{}
		for i := range ps {
			p := &ps[i]
			keep[p.ID] = true
			next := policy.Marshal(p)
			if o, ok := old.Get(p.ID); ok && string(policy.Marshal(o)) == string(next) {
				continue
			}
			c.putString([]byte(p.ID), next, 0, false)
		}
		for _, o := range old.Policies() {
			if !keep[o.ID] {
				c.deleteKey([]byte(o.ID))
			}
		}
	})
	return len(ps), ""
}

// policyError is the reply text of a policy that does not load.
func policyError(err error) string {
	return "invalid policy: " + strings.TrimPrefix(err.Error(), policy.ErrInvalid.Error()+": ")
}

// THROTTLE.POLICY method target principal [TENANT t] [COST n] [PROBE | EXPLAIN]
//
// decides one request by the policies: target is an HTTP path (normalized
// and matched against the templates; none matching is the UNKNOWN
// endpoint) or a plain name; the deciding policy is the first of the
// precedence (package policy); every tier of it is applied at one instant,
// as THROTTLE.ALL applies its limits, on keys derived from the policy, the
// tier, the tenant and the principal. PROBE answers the same without
// creating a key or charging anything. The reply:
//
//  1. limited: 1 when refused (never for a shadow policy)
//  2. the deciding policy's id, or nil when no policy applies
//  3. the endpoint: the template's shape, the name, or "unknown"
//  4. the tier that decided (1-based): the refusing tier with the longest
//     retry_after, or when allowed the one with the least remaining; 0 when
//     no policy applies
//  5. that tier's limit, 6) its remaining, 7) reset in ms, 8) retry_after
//     in ms (-1 when allowed): what x-ratelimit-* and Retry-After show
//  9. 1 when a shadow policy would have refused
//  10. every tier, as [algorithm, limit, remaining, reset_ms,
//     retry_after_ms, window_ms], for RateLimit-Policy and RateLimit
//
// EXPLAIN ("why was I limited") changes nothing either (each candidate is
// probed with the call's cost), and answers
// [endpoint, candidates]: every policy that applies, in the order of
// precedence (the first decides), each as [id, step, tiers], the step one
// of endpoint+tenant, endpoint, default+tenant, default, unknown (and
// unknown+tenant for a request that reached UNKNOWN), and each
// tier as [algorithm, limit, remaining, reset_ms, retry_after_ms,
// window_ms, key], its state as a peek sees it.
type policyCall struct {
	req       policy.Request
	principal []byte
	cost      int64 // 0: the policy's
	probe     bool
	explain   bool
}

// qty is the units the call takes from p: COST, else the policy's cost,
// else 1.
func (pc *policyCall) qty(p *policy.Policy) int64 {
	switch {
	case pc.cost > 0:
		return pc.cost
	case pc.cost < 0:
		return 0
	case p.Cost > 0:
		return p.Cost
	}
	return 1
}

// parsePolicyCall parses THROTTLE.POLICY's arguments; an error is the
// reply text.
func parsePolicyCall(args [][]byte) (policyCall, string) {
	var pc policyCall
	if len(args) < 4 {
		return pc, "ERR wrong number of arguments for 'throttle.policy' command"
	}
	var method string
	if len(args[2]) > 0 && args[2][0] == '/' { // else a plain name: no method
		var ok bool
		if method, ok = methodName(args[1]); !ok {
			return pc, "ERR the method must be an HTTP method such as GET"
		}
	}
	pc.req = policy.Request{Method: method, Target: string(args[2])}
	pc.principal = args[3]
	for rest := args[4:]; len(rest) > 0; {
		switch {
		case is(rest[0], "TENANT") && len(rest) > 1:
			if err := policy.CheckTenant(string(rest[1])); err != nil {
				return pc, "ERR " + policyError(err)
			}
			pc.req.Tenant, rest = string(rest[1]), rest[2:]
		case is(rest[0], "COST") && len(rest) > 1:
			n, ok := parseInt(rest[1])
			if !ok || n < 0 {
				return pc, "ERR COST must be a non-negative integer"
			}
			pc.cost, rest = n, rest[2:]
			if n == 0 {
				pc.cost = -1 // an explicit zero: a peek
			}
		case is(rest[0], "PROBE"):
			pc.probe, rest = true, rest[1:]
		case is(rest[0], "EXPLAIN"):
			pc.explain, rest = true, rest[1:]
		default:
			return pc, errSyntax
		}
	}
	return pc, ""
}

// methodName is an HTTP method's name in upper case: one of RFC 9110's
// without allocating, else any 1 to 32 letters; false for anything else.
func methodName(b []byte) (string, bool) {
	if len(b) == 0 || len(b) > 32 {
		return "", false
	}
	var up [32]byte
	for i, c := range b {
		if c |= 0x20; c < 'a' || c > 'z' {
			return "", false
		}
		up[i] = c - ('a' - 'A')
	}
	switch m := up[:len(b)]; string(m) {
	case "GET":
		return "GET", true
	case "HEAD":
		return "HEAD", true
	case "POST":
		return "POST", true
	case "PUT":
		return "PUT", true
	case "DELETE":
		return "DELETE", true
	case "PATCH":
		return "PATCH", true
	case "OPTIONS":
		return "OPTIONS", true
	case "CONNECT":
		return "CONNECT", true
	case "TRACE":
		return "TRACE", true
	default:
		return string(m), true
	}
}

// policySecrets redacts THROTTLE.POLICY's principal in the SLOWLOG: it may
// be an API key, and which policies treat it as a secret is not known from
// the arguments.
func policySecrets(args [][]byte, secret func(int)) {
	if len(args) > 3 {
		secret(3)
	}
}

// appendTierKey appends the key of one tier of p for a request: policy id, tier,
// tenant and principal (a keyed hash of it when the policy says it is a
// secret), joined by ":", which ids and tenants cannot hold.
func (s *Server) appendTierKey(k []byte, p *policy.Policy, tier int, tenant string, principal []byte) []byte {
	k = append(k, "policy:"...)
	k = append(k, p.ID...)
	k = append(k, ':')
	k = strconv.AppendInt(k, int64(tier+1), 10)
	k = append(k, ':')
	k = append(k, tenant...)
	k = append(k, ':')
	if !p.SecretPrincipal {
		return append(k, principal...)
	}
	m := hmac.New(sha256.New, []byte(s.cfg.PolicySecret))
	m.Write(principal)
	return base64.RawURLEncoding.AppendEncode(k, m.Sum(nil)[:18])
}

// policyLocks finds the keys THROTTLE.POLICY will use, from the table as
// it is now, adds their shards to l, and keeps what it found for the call's
// Run (pinnedPolicy): the call is decided by the table its keys came from,
// whatever changed while it waited for them, and its keys are built once.
func (s *Server) policyLocks(st *connState, args [][]byte, l *store.LockSet) {
	t := s.policies.Table()
	pin := &st.policy
	pin.call, pin.table, pin.parsed = &args[0][0], t, false
	pc, errText := parsePolicyCall(args)
	if errText != "" {
		return
	}
	if pc.explain {
		_, cands := t.Resolve(pc.req)
		var keys tierKeys
		for _, cand := range cands {
			keys.build(s, cand.Policy, &pc)
			keys.lock(s, cand.Policy, l)
		}
		return
	}
	endpoint, p := t.Decide(pc.req)
	pin.pc, pin.endpoint, pin.p, pin.parsed = pc, endpoint, p, true
	if p != nil {
		pin.keys.build(s, p, &pc)
		pin.keys.lock(s, p, l)
	}
}

// pinnedPolicy is what policyLocks found for a call: the table (always),
// and the parsed call with its deciding policy and that policy's keys,
// which its Run takes instead of doing it again when it is the same call
// (inside EXEC only the last call's is kept; the others resolve again, by
// the same table).
type pinnedPolicy struct {
	call     *byte // &args[0][0] of the call it was found for
	table    *policy.Table
	parsed   bool // pc, endpoint, p and keys are set
	pc       policyCall
	endpoint string
	p        *policy.Policy
	keys     tierKeys // p's; the buffer is reused by the next call
}

// tierKeys are the keys of one policy's tiers for a call, one after
// another in one buffer.
type tierKeys struct {
	buf  []byte
	ends [policy.MaxTiers]int // where each tier's key ends in buf
}

// build makes the keys of p's tiers for the call, reusing the buffer.
func (k *tierKeys) build(s *Server, p *policy.Policy, pc *policyCall) {
	k.buf = k.buf[:0]
	for i := range p.Tiers {
		k.buf = s.appendTierKey(k.buf, p, i, pc.req.Tenant, pc.principal)
		k.ends[i] = len(k.buf)
	}
}

// key is tier i's key.
func (k *tierKeys) key(i int) []byte {
	start := 0
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.buf[start:k.ends[i]:k.ends[i]]
}

// lock adds the shards of p's tiers' keys to l.
func (k *tierKeys) lock(s *Server, p *policy.Policy, l *store.LockSet) {
	for i := range p.Tiers {
		l.Add(s.store, k.key(i))
	}
}

// stepNames name the steps of precedence in EXPLAIN's reply.
var stepNames = [...]string{
	policy.StepEndpointTenant: "endpoint+tenant",
	policy.StepEndpointAny:    "endpoint",
	policy.StepDefaultTenant:  "default+tenant",
	policy.StepDefaultAny:     "default",
	policy.StepUnknownAny:     "unknown",
}

// tierLimits fills limits with those of p's tiers for a call, on their
// keys, and charging qty. With extend, the keys' shards are taken first
// (policyLocks locked the keys of another resolution); false when one
// could not be (see errPolicyChanged).
func (c *Ctx) tierLimits(limits []limit, t *policy.Table, p *policy.Policy, keys *tierKeys, qty int64, extend bool) bool {
	for i, b := range t.Tiers(p) {
		key := keys.key(i)
		if extend && !c.srv.store.Extend(&c.st.locks, key) {
			return false
		}
		limits[i] = limit{key: key, eng: b.Limiter, gp: b.GCRA, qty: qty}
		if b.Limiter != nil {
			limits[i].fam = familyOfEngine(b.Limiter.Kind())
		}
	}
	return true
}

// explainPolicy answers THROTTLE.POLICY ... EXPLAIN.
func explainPolicy(c *Ctx, t *policy.Table, pc *policyCall) {
	endpoint, cands := t.Resolve(pc.req)
	all := make([][]limit, len(cands))
	for i, cand := range cands {
		qty := pc.qty(cand.Policy)
		limits := make([]limit, len(cand.Policy.Tiers))
		var keys tierKeys // the limits keep the keys
		keys.build(c.srv, cand.Policy, pc)
		if !c.tierLimits(limits, t, cand.Policy, &keys, qty, true) {
			c.W.Error(errPolicyChanged.Error())
			return
		}
		if _, errText := decideAll(c, limits, qty, true); errText != "" {
			c.W.Error(errText)
			return
		}
		all[i] = limits
	}
	c.W.Array(2)
	c.W.BulkString(endpoint)
	c.W.Array(len(cands))
	for i, cand := range cands {
		c.W.Array(3)
		c.W.BulkString(cand.Policy.ID)
		step := stepNames[cand.Step]
		if endpoint == policy.Unknown && cand.Step <= policy.StepEndpointAny {
			// The UNKNOWN endpoint's own policies.
			step = strings.Replace(step, "endpoint", "unknown", 1)
		}
		c.W.BulkString(step)
		c.W.Array(len(all[i]))
		for j := range all[i] {
			c.W.Array(7)
			writeTier(c, &cand.Policy.Tiers[j], &all[i][j])
			c.W.Bulk(all[i][j].key)
		}
	}
}

// errPolicyChanged: the policies changed between locking and deciding and
// a new key's shard could not be taken without waiting out of order.
var errPolicyChanged = errors.New("ERR the policies changed while the call waited; send it again")

func throttlePolicy(c *Ctx) {
	pin := &c.st.policy
	t := pin.table
	if t == nil { // not through Spec.Locks (cannot happen today)
		t = c.srv.policies.Table()
	}
	var (
		pc       policyCall
		endpoint string
		p        *policy.Policy
		keys     *tierKeys
		own      tierKeys // the keys of a call policyLocks did not pin
	)
	pinned := pin.parsed && pin.call == &c.Args[0][0]
	if pinned {
		pc, endpoint, p, keys = pin.pc, pin.endpoint, pin.p, &pin.keys
	} else {
		var errText string
		if pc, errText = parsePolicyCall(c.Args); errText != "" {
			c.W.Error(errText)
			return
		}
		if pc.explain {
			explainPolicy(c, t, &pc)
			return
		}
		endpoint, p = t.Decide(pc.req)
		if p != nil {
			own.build(c.srv, p, &pc)
		}
		keys = &own
	}
	pin.parsed = false // once: a later call may reuse the buffer
	if p == nil {
		c.W.Array(10)
		c.W.Int(0)
		c.W.Null()
		c.W.BulkString(endpoint)
		for range 4 { // tier, limit, remaining, reset
			c.W.Int(0)
		}
		c.W.Int(-1) // retry_after: allowed
		c.W.Int(0)
		c.W.Array(0)
		return
	}
	qty := pc.qty(p)
	var buf [policy.MaxTiers]limit
	limits := buf[:len(p.Tiers)]
	if !c.tierLimits(limits, t, p, keys, qty, !pinned) {
		c.W.Error(errPolicyChanged.Error())
		return
	}
	limited, errText := decideAll(c, limits, qty, pc.probe)
	if errText != "" {
		c.W.Error(errText)
		return
	}
	shadowed := limited && p.Shadow
	if shadowed {
		limited = false
	}
	if !pc.probe && qty > 0 {
		c.decide(qty, limited)
		c.srv.policies.count(p.ID, limited, shadowed)
	}
	writePolicyReply(c, p, endpoint, limits, limited, shadowed, p.Tiers)
}

// decideAll checks every limit at the command's instant and, when all
// allow and the call is not a probe, charges each; a limit that would have
// allowed a refused call shows its state as a peek would. It is
// THROTTLE.ALL's and THROTTLE.POLICY's one decision.
func decideAll(c *Ctx, limits []limit, qty int64, probe bool) (limited bool, errText string) {
	for i := range limits {
		l := &limits[i]
		if errText := l.load(c); errText != "" {
			return false, errText
		}
		if errText := l.check(c); errText != "" {
			return false, errText
		}
		limited = limited || l.res.Limited
	}
	for i := range limits {
		l := &limits[i]
		switch {
		case !limited && qty > 0 && !probe:
			if errText := l.commit(c); errText != "" {
				// Only a corrupt state fails here, and check has read
				// every state already.
				return false, errText
			}
		case limited && !l.res.Limited:
			l.qty = 0
			l.check(c) // a peek cannot fail where the real check did not
		}
	}
	return limited, ""
}

// writePolicyReply writes THROTTLE.POLICY's reply for a decided policy.
func writePolicyReply(c *Ctx, p *policy.Policy, endpoint string, limits []limit, limited, shadowed bool, tiers []policy.Tier) {
	decider := 0
	for i := range limits {
		l, d := &limits[i], &limits[decider]
		switch {
		case l.res.Limited != d.res.Limited:
			if l.res.Limited {
				decider = i
			}
		case l.res.Limited && l.res.RetryAfter > d.res.RetryAfter,
			!l.res.Limited && l.res.Remaining < d.res.Remaining:
			decider = i
		}
	}
	d := &limits[decider].res
	c.W.Array(10)
	c.W.Int(b2i(limited))
	c.W.BulkString(p.ID)
	c.W.BulkString(endpoint)
	c.W.Int(int64(decider + 1))
	c.W.Int(d.Limit)
	c.W.Int(d.Remaining)
	c.W.Int(ms(d.ResetAfter))
	c.W.Int(ms(d.RetryAfter))
	c.W.Int(b2i(shadowed))
	c.W.Array(len(limits))
	for i := range limits {
		c.W.Array(6)
		writeTier(c, &tiers[i], &limits[i])
	}
}

// writeTier writes a tier's algorithm, limit, remaining, reset_ms,
// retry_after_ms and window_ms (a bucket's refill time: policy.Tier.Window).
func writeTier(c *Ctx, t *policy.Tier, l *limit) {
	c.W.BulkString(t.Algorithm)
	c.W.Int(l.res.Limit)
	c.W.Int(l.res.Remaining)
	c.W.Int(ms(l.res.ResetAfter))
	c.W.Int(ms(l.res.RetryAfter))
	c.W.Int(t.Window())
}

// ms is a duration in ns in the reply's milliseconds, rounded up; -1
// stays -1.
func ms(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return ns/1e6 + min(ns%1e6, 1)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
