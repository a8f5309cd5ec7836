package commands

import (
	"errors"
	"github.com/throttleddb/throttled/internal/memsize"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/store"
	"slices"
	"strconv"
	"strings"
	"time"
)

// setting is one CONFIG parameter. set is nil for settings fixed at start.
// apply, when not nil, runs once per CONFIG SET after every pair has been
// set, shared by the settings that give the same group: settings that only
// make sense together (a certificate and its key) are checked and put in
// force in one step, as Redis 7 applies them.
type setting struct {
	name  string
	get   func() string
	set   func(v string) error
	apply func() error
	group string
}

// A Setting is a CONFIG parameter defined outside this package (the
// server's TLS files): CONFIG GET shows Get, CONFIG SET calls Set with the
// new value (nil: the setting is fixed at start) and then, once for all
// the pairs of the command with the same Group, Apply. When Set or Apply
// fails, every pair of the command is set back to its old value, and the
// error text follows Redis' "CONFIG SET failed (possibly related to
// argument '<name>') - ".
type Setting struct {
	Name  string
	Get   func() string
	Set   func(v string) error
	Apply func() error
	Group string
}

type settings struct{ list []setting }

// newSettings lists the parameters CONFIG GET shows: the ones Redis clients
// and tools ask for (redis-benchmark reads save and appendonly, redis-cli
// databases) with the values that are true of this server, plus the start-up
// settings main passes in.
func newSettings(s *Server) *settings {
	fixed := func(name, v string) setting {
		return setting{name: name, get: func() string { return v }}
	}
	list := []setting{
		fixed("save", ""),
		fixed("appendonly", yesNo(s.cfg.Persistence != nil)),
		fixed("appendfsync", appendFsync(s.cfg.Persistence)),
		fixed("databases", strconv.Itoa(s.store.Databases())),
		{name: "maxmemory", get: func() string {
			_, mm := s.store.Limits()
			return strconv.FormatInt(mm, 10)
		}, set: func(v string) error {
			n, err := memsize.Parse(v)
			if err != nil {
				return errors.New("argument must be a memory value")
			}
			if err := s.boundable(); err != nil {
				return err
			}
			mk, _ := s.store.Limits()
			s.store.SetLimits(mk, n)
			return nil
		}},
		{name: "maxkeys", get: func() string {
			mk, _ := s.store.Limits()
			return strconv.FormatInt(mk, 10)
		}, set: func(v string) error {
			n, ok := store.ParseInt([]byte(v))
			if !ok || n < 0 {
				return errors.New("argument couldn't be parsed into an integer")
			}
			if err := s.boundable(); err != nil {
				return err
			}
			_, mm := s.store.Limits()
			s.store.SetLimits(n, mm)
			return nil
		}},
		// Redis 7's name and its older alias: how long (ms) a script runs
		// before other clients get BUSY and SCRIPT KILL may stop it.
		busyThreshold(s, "busy-reply-threshold"),
		busyThreshold(s, "lua-time-limit"),
		// The policy only acts under a bound, which a Raft member or a
		// mesh node refuses: there it may be set, and changes nothing.
		{name: "maxmemory-policy", get: func() string { return s.store.EvictionPolicy().String() }, set: func(v string) error {
			var p store.EvictionPolicy
			if err := p.Set(v); err != nil {
				return err
			}
			s.store.SetEvictionPolicy(p)
			return nil
		}},
		// requirepass is the default user's password, as in Redis: setting
		// it replaces the user's passwords ("" makes it nopass).
		{name: "requirepass", get: s.requirePass, set: func(v string) error {
			s.password.Store(&v)
			s.acl.setDefaultPassword(v)
			return nil
		}},
		slowlogSetting("slowlog-log-slower-than", &s.slow.slowerThan, minSlowerThan),
		slowlogSetting("slowlog-max-len", &s.slow.maxLen, minMaxLen),
		latencySetting(&s.latency),
		fixed("aclfile", s.cfg.ACLFile),
	}
	list = append(list, clientSettings(s)...)
	for _, x := range s.cfg.Extra {
		list = append(list, setting{name: x.Name, get: x.Get, set: x.Set, apply: x.Apply, group: x.Group})
	}
	for k, v := range s.cfg.Settings {
		if !slices.ContainsFunc(list, func(x setting) bool { return x.name == k }) {
			list = append(list, fixed(k, v))
		}
	}
	slices.SortFunc(list, func(a, b setting) int { return strings.Compare(a.name, b.name) })
	return &settings{list: list}
}

// boundable refuses a keyspace bound on a Raft node: eviction samples each
// node's own hash layout, so replicas would evict different keys (the
// flags are refused at start for the same reason).
func (s *Server) boundable() error {
	if s.cluster != nil {
		return errors.New("cannot be set on a Raft node: replicas would evict different keys")
	}
	return nil
}

func (st *settings) find(name string) *setting {
	for i := range st.list {
		if st.list[i].name == name {
			return &st.list[i]
		}
	}
	return nil
}

var configHelp = []string{
	"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
	"HELP",
	"    Print this help.",
}

// CONFIG GET pattern [pattern ...] | SET name value [name value ...] | RESETSTAT | HELP
func config(c *Ctx) {
	sub := c.Args[1]
	st := c.srv.conf
	switch {
	case is(sub, "GET"):
		if len(c.Args) < 3 {
			c.W.Error(wrongArity("config|get"))
			return
		}
		// A name without glob characters is echoed as given, as Redis
		// does ("CONFIG GET DATABASES" answers "DATABASES"); the first
		// argument that matches a setting names it.
		var names []string
		var hits []*setting
		for i := range st.list {
			for _, p := range c.Args[2:] {
				lp := strings.ToLower(string(p))
				exact := !strings.ContainsAny(lp, "[*?")
				if (exact && lp == st.list[i].name) || (!exact && globMatch(lp, st.list[i].name)) {
					name := st.list[i].name
					if exact {
						name = string(p)
					}
					names = append(names, name)
					hits = append(hits, &st.list[i])
					break
				}
			}
		}
		c.W.Map(len(hits))
		for i, h := range hits {
			c.W.BulkString(names[i])
			c.W.BulkString(h.get())
		}
	case is(sub, "SET"):
		if len(c.Args) < 4 || len(c.Args)%2 != 0 {
			c.W.Error(wrongArity("config|set"))
			return
		}
		// Check every pair before changing anything, so a bad pair leaves
		// all settings as they were.
		seen := map[*setting]bool{}
		for i := 2; i < len(c.Args); i += 2 {
			name := strings.ToLower(string(c.Args[i]))
			h := st.find(name)
			if h == nil {
				c.W.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + sanitize(name, 128) + "'")
				return
			}
			if seen[h] {
				// Redis names the argument as it was given.
				c.W.Error("ERR CONFIG SET failed (possibly related to argument '" + sanitize(string(c.Args[i]), 128) + "') - duplicate parameter")
				return
			}
			seen[h] = true
			// Setting a fixed value to what it already is changes nothing
			// and is allowed, so scripts that run CONFIG SET save "" work.
			if h.set == nil && h.get() != string(c.Args[i+1]) {
				c.W.Error("ERR CONFIG SET failed (possibly related to argument '" + name + "') - can't set immutable config")
				return
			}
		}
		// A value that fails to apply puts back the ones set before it, as
		// Redis does, so CONFIG SET changes all or nothing.
		var undo []func()
		fail := func(h *setting, err error) {
			for _, u := range slices.Backward(undo) {
				u()
			}
			c.W.Error("ERR CONFIG SET failed (possibly related to argument '" + h.name + "') - " + err.Error())
		}
		var applies []*setting
		for i := 2; i < len(c.Args); i += 2 {
			h := st.find(strings.ToLower(string(c.Args[i])))
			if h.set == nil {
				continue
			}
			old := h.get()
			if err := h.set(string(c.Args[i+1])); err != nil {
				fail(h, err)
				return
			}
			undo = append(undo, func() { h.set(old) })
			if h.apply != nil && !slices.ContainsFunc(applies, func(a *setting) bool { return a.group == h.group }) {
				applies = append(applies, h)
			}
		}
		for i, h := range applies {
			if err := h.apply(); err != nil {
				fail(h, err)
				// Put the groups applied before back in force with
				// their old values.
				for _, a := range applies[:i] {
					a.apply()
				}
				return
			}
		}
		c.W.OK()
	case is(sub, "RESETSTAT"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("config|resetstat"))
			return
		}
		for sp, st := range c.srv.stats {
			st.each(sp, func(_ string, st *cmdStats) { st.reset() })
		}
		c.srv.errorStats.reset()
		c.W.OK()
	case is(sub, "HELP"):
		c.help("config", configHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "CONFIG"))
	}
}

// configSecrets: the values CONFIG SET gives requirepass are secret, in
// every pair, whether or not the command succeeds.
func configSecrets(args [][]byte, secret func(int)) {
	if !is(args[1], "SET") {
		return
	}
	for i := 2; i+1 < len(args); i += 2 {
		if is(args[i], "REQUIREPASS") {
			secret(i + 1)
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// appendFsync is the fsync policy CONFIG GET appendfsync shows: the data
// folder's, or Redis' default when there is none.
func appendFsync(p *persistence.DB) string {
	if p == nil {
		return "everysec"
	}
	return p.Stats().Fsync.String()
}

// busyThreshold is the script time-limit setting under name, in ms.
func busyThreshold(s *Server, name string) setting {
	return setting{name: name, get: func() string {
		return strconv.FormatInt(s.scripts.TimeLimit().Milliseconds(), 10)
	}, set: func(v string) error {
		n, ok := store.ParseInt([]byte(v))
		if !ok || n < 0 {
			return errors.New("argument couldn't be parsed into an integer")
		}
		s.scripts.SetTimeLimit(time.Duration(n) * time.Millisecond)
		return nil
	}}
}
