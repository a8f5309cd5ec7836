package raft_test

import (
	"testing"

	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/replication/repltest"
	"github.com/throttleddb/throttled/server"
)

func TestConformance(t *testing.T) {
	repltest.Run(t, repltest.Mode{}, func(t *testing.T, n int) repltest.Cluster { return rafttest.New(t, n, server.Config{}) })
}
