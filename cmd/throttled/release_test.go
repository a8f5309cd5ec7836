package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/commands"
)

// TestReleaseScript builds a release binary for this machine's architecture
// with scripts/release.sh, as a release does for linux/amd64 and arm64, and
// checks what a user downloading it relies on: the binary is static (no
// program interpreter, so it runs on any Linux and in a scratch image), it
// reports the stamped version and the commit it was built from, and
// SHA256SUMS holds its digest.
func TestReleaseScript(t *testing.T) {
	const version = "9.8.7-test"
	out, name := release(t, "VERSION="+version)
	bin := filepath.Join(out, name)
	if want := "throttled-" + version + "-linux-" + runtime.GOARCH; name != want {
		t.Errorf("release.sh wrote %s, want %s", name, want)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: it is not static", name)
		}
	}
	f.Close()

	got, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if !strings.HasPrefix(string(got), "throttled server v="+version+" ") {
		t.Errorf("--version = %q, want the stamped version %s", got, version)
	}
	// Go stamps the commit from a clone (CI's, a release's); it finds none
	// in a git worktree, whose .git is a file.
	if st, err := os.Stat("../../.git"); err != nil || !st.IsDir() {
		t.Log("not a clone: the commit is not checked")
	} else if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err != nil {
		t.Errorf("git rev-parse HEAD: %v", err)
	} else {
		if want := " sha=" + string(head[:8]) + ":"; !strings.Contains(string(got), want) {
			t.Errorf("--version = %q, want the commit%s", got, want)
		}
	}

	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]) + "  " + name + "\n"; !bytes.Equal(sums, []byte(want)) {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
}

// TestReleaseScript_SourceVersion: without VERSION (as `make release` and
// the Dockerfile run it) the script takes the version from commands.Version
// in the source, names the binary after it, and the binary reports it.
func TestReleaseScript_SourceVersion(t *testing.T) {
	out, name := release(t)
	if want := "throttled-" + commands.Version + "-linux-" + runtime.GOARCH; name != want {
		t.Errorf("release.sh wrote %s, want %s", name, want)
	}
	got, err := exec.Command(filepath.Join(out, name), "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if !strings.HasPrefix(string(got), "throttled server v="+commands.Version+" ") {
		t.Errorf("--version = %q, want the source's version %s", got, commands.Version)
	}
}

// release runs scripts/release.sh for this machine's architecture with env
// added to the test's environment, and returns the output folder and the
// name of the one binary it wrote there (SHA256SUMS aside).
func release(t *testing.T, env ...string) (out, name string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("release binaries are built for Linux")
	}
	out = t.TempDir()
	cmd := exec.Command("bash", "../../scripts/release.sh")
	cmd.Env = append(os.Environ(), "VERSION=", "TARGETS=linux/"+runtime.GOARCH, "OUT="+out)
	cmd.Env = append(cmd.Env, env...)
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, log)
	}
	files, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name() == "SHA256SUMS" {
			continue
		}
		if name != "" {
			t.Fatalf("release.sh wrote %s and %s, want one binary", name, f.Name())
		}
		name = f.Name()
	}
	if name == "" {
		t.Fatal("release.sh wrote no binary")
	}
	return out, name
}
