package main

import (
	"io"
	"slices"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-P", "1, 4,16", "-skip", "memory,restart", "-keys", "10"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Pipelines, []int{1, 4, 16}) || !c.Skip["memory"] || !c.Skip["restart"] || c.Skip["throughput"] || c.keys != 10 {
		t.Errorf("got %+v", c)
	}
	for _, args := range [][]string{{"-skip", "disk"}, {"-P", "0"}, {"-runs", "0"}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}

func TestLoadTook(t *testing.T) {
	tests := map[string]string{
		`time=2026-11-22T05:00:00.000Z level=INFO msg="loaded data folder" dir=/tmp/x keys=1000000 appendfsync=everysec took=1.234s`: "1.23 s",
		`time=2026-11-22T05:00:00.000Z level=INFO msg="loaded data folder" dir=/tmp/x keys=0 appendfsync=always took=850ms`:          "0.85 s",
		"1:M 22 Nov 2026 05:00:00.000 * DB loaded from append only file: 2.345 seconds":                                              "2.35 s",
		"nothing here": "-",
	}
	for log, want := range tests {
		if got := loadTook(log); got != want {
			t.Errorf("loadTook(%q) = %q, want %q", log, got, want)
		}
	}
}
