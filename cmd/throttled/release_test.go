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
)

// TestReleaseScript builds a release binary for this machine's architecture
// with scripts/release.sh, as a release does for linux/amd64 and arm64, and
// checks what a user downloading it relies on: the binary is static (no
// program interpreter, so it runs on any Linux and in a scratch image), it
// reports the stamped version and the commit it was built from, and
// SHA256SUMS holds its digest.
func TestReleaseScript(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("release binaries are built for Linux")
	}
	out := t.TempDir()
	const version = "9.8.7-test"
	cmd := exec.Command("bash", "../../scripts/release.sh")
	cmd.Env = append(os.Environ(), "VERSION="+version, "TARGETS=linux/"+runtime.GOARCH, "OUT="+out)
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, log)
	}
	name := "throttled-" + version + "-linux-" + runtime.GOARCH
	bin := filepath.Join(out, name)

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
