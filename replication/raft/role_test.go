package raft_test

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
)

// exporterInfo reads INFO text the way oliver006/redis_exporter does
// (exporter/info.go): "key:value" lines, "# Section" headers, slaveN
// lines split on "," and "=" with a numeric offset and lag, master_*
// fields by name. It returns the fields and the parsed slaveN lines.
func exporterInfo(t *testing.T, info string) (map[string]string, []map[string]string) {
	t.Helper()
	fields := map[string]string{}
	var slaves []map[string]string
	reSlave := regexp.MustCompile(`^slave\d+`)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "# ") || !strings.Contains(line, ":") {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		fields[k] = v
		if !reSlave.MatchString(k) {
			continue
		}
		kv := map[string]string{}
		for _, part := range strings.Split(v, ",") {
			x := strings.Split(part, "=")
			if len(x) != 2 {
				t.Fatalf("%s: %q is not key=value", k, part)
			}
			kv[x[0]] = x[1]
		}
		for _, num := range []string{"offset", "lag"} {
			if _, err := strconv.ParseFloat(kv[num], 64); err != nil {
				t.Fatalf("%s: %s=%q is not a number", k, num, kv[num])
			}
		}
		slaves = append(slaves, kv)
	}
	return fields, slaves
}

// ROLE and INFO replication read as Redis' to Redis-aware tools: the
// leader is a master with the other members as online replicas, a follower
// a replica of the leader's RESP address with its link up; checked with
// redis-cli and an exporter-style reader. Offsets are applied indexes.
func TestRaft_RoleAndInfoReplication(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	c.Do(lead, "SET", "k", "v")
	leadHost, leadPort, _ := net.SplitHostPort(lead.Node.Addr())
	for _, m := range c.Members {
		testwait.For(t, 10*time.Second, m.ID+"'s ROLE", func() bool {
			v, ok := c.Do(m, "ROLE").([]any)
			if !ok {
				return false
			}
			if m == lead {
				reps, _ := v[2].([]any)
				if v[0] != "master" || len(reps) != 2 {
					return false
				}
				for _, r := range reps {
					if e := r.([]any); len(e) != 3 || e[0] != "127.0.0.1" || e[2] == "0" {
						return false
					}
				}
				return v[1].(int64) > 0
			}
			return fmt.Sprint(v[:4]) == fmt.Sprint([]any{"slave", leadHost, mustInt(leadPort), "connected"}) && v[4].(int64) > 0
		})
		info := fmt.Sprint(c.Do(m, "INFO", "replication"))
		fields, slaves := exporterInfo(t, info)
		if fields["throttled_mode"] != "raft" {
			t.Errorf("%s: throttled_mode %q", m.ID, fields["throttled_mode"])
		}
		if m == lead {
			if fields["role"] != "master" || fields["connected_slaves"] != "2" || len(slaves) != 2 {
				t.Fatalf("leader's INFO replication:\n%s", info)
			}
			for _, s := range slaves {
				if s["state"] != "online" || s["ip"] != "127.0.0.1" || s["port"] == "" {
					t.Fatalf("leader's replica line %v:\n%s", s, info)
				}
			}
			continue
		}
		want := map[string]string{"role": "slave", "master_host": leadHost, "master_port": leadPort, "master_link_status": "up",
			"master_sync_in_progress": "0", "slave_read_only": "1", "slave_priority": "100", "connected_slaves": "0"}
		for k, v := range want {
			if fields[k] != v {
				t.Errorf("%s: %s is %q, want %q:\n%s", m.ID, k, fields[k], v, info)
			}
		}
		for _, k := range []string{"master_last_io_seconds_ago", "slave_repl_offset", "master_repl_offset"} {
			if _, err := strconv.Atoi(fields[k]); err != nil {
				t.Errorf("%s: %s %q is not a number", m.ID, k, fields[k])
			}
		}
	}
	// A stopped follower shows offline on the leader.
	stopped := c.Follower()
	c.Stop(stopped)
	testwait.For(t, 10*time.Second, "an offline replica on the leader", func() bool {
		_, slaves := exporterInfo(t, fmt.Sprint(c.Do(lead, "INFO", "replication")))
		offline := 0
		for _, s := range slaves {
			if s["state"] == "offline" && s["offset"] == "0" {
				offline++
			}
		}
		return len(slaves) == 2 && offline == 1
	})
	// redis-cli reads both as it reads Redis'.
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed")
	}
	f := c.Follower()
	_, port, _ := net.SplitHostPort(f.Node.Addr())
	out, err := exec.Command(cli, "-p", port, "role").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "slave\n"+leadHost+"\n"+leadPort+"\nconnected\n") {
		t.Errorf("redis-cli role on a follower: %v\n%s", err, out)
	}
	_, port, _ = net.SplitHostPort(lead.Node.Addr())
	out, err = exec.Command(cli, "-p", port, "info", "replication").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "role:master") || !strings.Contains(string(out), "connected_slaves:2") {
		t.Errorf("redis-cli info replication on the leader: %v\n%s", err, out)
	}
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
