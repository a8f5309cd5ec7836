package main

import (
	"os"
	"regexp"
	"testing"
)

// TestDockerfile_GoVersion: the Dockerfile builds with the Go release go.mod
// asks for. This machine runs no Docker engine, so the image itself is not
// built by the tests; this keeps the two from drifting apart.
func TestDockerfile_GoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	got := regexp.MustCompile(`(?m)^FROM golang:(\S+?)-\S+ AS build$`).FindSubmatch(docker)
	if want == nil || got == nil {
		t.Fatalf("go.mod's go line %q, Dockerfile's build stage %q", want, got)
	}
	if string(got[1]) != string(want[1]) {
		t.Errorf("Dockerfile builds with Go %s, go.mod asks for %s", got[1], want[1])
	}
}
