package commands

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/internal/memsize"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// ClientLimits are the client settings: resp's, which the listener
// enforces, and the output limits of the client classes Redis has and we
// do not (replicas, pub/sub), kept so that redis.conf lines and CONFIG
// GET/SET client-output-buffer-limit carry over.
type ClientLimits struct {
	resp.ClientLimits
	ReplicaOutput, PubSubOutput resp.OutputLimit
}

// DefaultClientLimits returns resp's defaults and Redis' replica and
// pub/sub output limits.
func DefaultClientLimits() ClientLimits {
	return ClientLimits{
		ClientLimits:  resp.DefaultClientLimits(),
		ReplicaOutput: resp.OutputLimit{Hard: 256 << 20, Soft: 64 << 20, SoftFor: time.Minute},
		PubSubOutput:  resp.OutputLimit{Hard: 32 << 20, Soft: 8 << 20, SoftFor: time.Minute},
	}
}

// Redis' complaints about a client-output-buffer-limit value. They are
// reply texts, verbatim (CONFIG SET answers with them), hence capitalised.
var (
	errOutputArgs  = errors.New("Wrong number of arguments in buffer limit configuration.")
	errOutputClass = errors.New("Invalid client class specified in buffer limit configuration.")
	errOutputValue = errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
)

// SetOutputLimits applies a client-output-buffer-limit value: groups of
// "class hard soft seconds" (class normal, replica or slave, pubsub; sizes
// in Redis' units), as redis.conf and CONFIG SET take them. On error,
// Redis' text, l is unchanged.
func (l *ClientLimits) SetOutputLimits(v string) error {
	f := strings.Fields(v)
	if len(f)%4 != 0 {
		return errOutputArgs
	}
	next := *l
	for ; len(f) > 0; f = f[4:] {
		var dst *resp.OutputLimit
		switch strings.ToLower(f[0]) {
		case "normal":
			dst = &next.Output
		case "replica", "slave":
			dst = &next.ReplicaOutput
		case "pubsub":
			dst = &next.PubSubOutput
		default:
			return errOutputClass
		}
		hard, err1 := memsize.Parse(f[1])
		soft, err2 := memsize.Parse(f[2])
		secs, ok := store.ParseInt([]byte(f[3]))
		if err1 != nil || err2 != nil || !ok || secs < 0 || secs > maxSeconds {
			return errOutputValue
		}
		*dst = resp.OutputLimit{Hard: hard, Soft: soft, SoftFor: time.Duration(secs) * time.Second}
	}
	*l = next
	return nil
}

// OutputLimits returns client-output-buffer-limit as CONFIG GET shows it.
func (l *ClientLimits) OutputLimits() string {
	var b []byte
	for i, c := range []struct {
		name string
		o    resp.OutputLimit
	}{{"normal", l.Output}, {"slave", l.ReplicaOutput}, {"pubsub", l.PubSubOutput}} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, c.name...)
		for _, n := range []int64{c.o.Hard, c.o.Soft, int64(c.o.SoftFor / time.Second)} {
			b = strconv.AppendInt(append(b, ' '), n, 10)
		}
	}
	return string(b)
}

// maxSeconds bounds settings in seconds, Redis' INT_MAX; it keeps them
// clear of time.Duration's overflow.
const maxSeconds = 1<<31 - 1

// clientSettings are the CONFIG parameters of the client limits and of
// protected mode.
func clientSettings(s *Server) []setting {
	limit := func(name string, min, max int64, get func(*ClientLimits) int64, set func(*ClientLimits, int64)) setting {
		return setting{name: name, get: func() string {
			l := s.clientLimits()
			return strconv.FormatInt(get(&l), 10)
		}, set: func(v string) error {
			n, ok := store.ParseInt([]byte(v))
			if !ok {
				return errors.New("argument couldn't be parsed into an integer")
			}
			if n < min || n > max {
				return errors.New("argument must be between " + strconv.FormatInt(min, 10) + " and " + strconv.FormatInt(max, 10) + " inclusive")
			}
			return s.setClientLimits(func(l *ClientLimits) error {
				set(l, n)
				return nil
			})
		}}
	}
	seconds := func(name string, field func(*ClientLimits) *time.Duration) setting {
		return limit(name, 0, maxSeconds,
			func(l *ClientLimits) int64 { return int64(*field(l) / time.Second) },
			func(l *ClientLimits, n int64) { *field(l) = time.Duration(n) * time.Second })
	}
	return []setting{
		limit("maxclients", 1, 1<<32-1,
			func(l *ClientLimits) int64 { return int64(l.MaxClients) },
			func(l *ClientLimits, n int64) { l.MaxClients = int(n) }),
		seconds("timeout", func(l *ClientLimits) *time.Duration { return &l.Timeout }),
		seconds("tcp-keepalive", func(l *ClientLimits) *time.Duration { return &l.KeepAlive }),
		{name: "client-query-buffer-limit", get: func() string {
			return strconv.Itoa(s.clientLimits().MaxQueryLen)
		}, set: func(v string) error {
			n, err := memsize.Parse(v)
			if err != nil {
				return errors.New("argument must be a memory value")
			}
			if n < 1<<20 {
				return errors.New("argument must be between 1048576 and 9223372036854775807 inclusive")
			}
			return s.setClientLimits(func(l *ClientLimits) error {
				l.MaxQueryLen = int(n)
				return nil
			})
		}},
		{name: "client-output-buffer-limit", get: func() string {
			l := s.clientLimits()
			return l.OutputLimits()
		}, set: func(v string) error {
			return s.setClientLimits(func(l *ClientLimits) error { return l.SetOutputLimits(v) })
		}},
		{name: "protected-mode", get: func() string { return yesNo(s.protected.Load()) }, set: func(v string) error {
			switch strings.ToLower(v) {
			case "yes":
				s.protected.Store(true)
			case "no":
				s.protected.Store(false)
			default:
				return errors.New("argument must be 'yes' or 'no'")
			}
			return nil
		}},
	}
}

// clientLimits returns the client limits in force.
func (s *Server) clientLimits() ClientLimits {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	return s.clients
}

// setClientLimits changes the client limits with change, and hands them to
// the listener; when change fails nothing changes.
func (s *Server) setClientLimits(change func(*ClientLimits) error) error {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	next := s.clients
	if err := change(&next); err != nil {
		return err
	}
	s.clients = next
	if n := s.net.Load(); n != nil {
		n.SetClientLimits(next.ClientLimits)
	}
	return nil
}

// Protected reports whether protected mode refuses clients that do not
// come from a loopback address: protected-mode yes and no password for
// the default user, as Redis decides it. It is the resp.Config.Protected
// of the listener.
func (s *Server) Protected() bool { return s.protected.Load() && !s.RequireAuth() }
