package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
)

// TestDockerfile_GoVersion: the Dockerfile builds with the Go release go.mod
// asks for, so the two do not drift apart.
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

// TestDockerignore: what git ignores stays out of the Docker build context
// too (a walkthrough's TLS keys and ACL file, data folders, node_modules):
// each line of every .gitignore has its pattern in .dockerignore, written as
// Docker reads it (from the context root; git's patterns without a slash
// match at any depth, which Docker spells **/).
func TestDockerignore(t *testing.T) {
	docker, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, line := range ignoreLines(docker) {
		have[line] = true
	}
	err = filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return err
		}
		if d.Name() != ".gitignore" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel("../..", filepath.Dir(p))
		for _, line := range ignoreLines(data) {
			if strings.HasPrefix(line, "!") {
				t.Errorf("%s: %q: a negated pattern is not translated; write .dockerignore's by hand and teach this test", p, line)
				continue
			}
			pattern := strings.TrimSuffix(line, "/")
			if !strings.Contains(pattern, "/") {
				pattern = "**/" + pattern
			}
			want := path.Join(filepath.ToSlash(dir), strings.TrimPrefix(pattern, "/"))
			if !have[want] {
				t.Errorf("%s ignores %q; .dockerignore lacks %q", p, line, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ignoreLines returns an ignore file's patterns: its lines without comments
// and blank lines.
func ignoreLines(data []byte) []string {
	var lines []string
	for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

// TestDockerImage builds the Dockerfile and runs the image as its header
// says, checking with redis-cli from the host through a port published on
// loopback: protected mode refuses a client from outside the container
// without a password and takes one with --requirepass, CL.THROTTLE's state
// outlives the container on the named volume, the server runs as uid 65532,
// and `docker stop` ends it by SIGTERM with exit status 0, not by SIGKILL
// after the grace period. It needs a Docker engine and the golang base
// image, and builds for a minute or more, so it runs only when asked:
//
//	THROTTLED_TEST_DOCKER=1 go test -run TestDockerImage ./cmd/throttled
func TestDockerImage(t *testing.T) {
	if os.Getenv("THROTTLED_TEST_DOCKER") == "" {
		t.Skip("set THROTTLED_TEST_DOCKER=1 to build and run the Docker image (needs a Docker engine)")
	}
	for _, tool := range []string{"docker", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("THROTTLED_TEST_DOCKER is set but %s is missing: %v", tool, err)
		}
	}
	name := "throttled-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	image, volume := name+":latest", name+"-data"
	// The build network is the host's, so the build reaches the Go module
	// proxy the way the host does; the Dockerfile is built unchanged.
	docker(t, "build", "--network", "host", "-t", image, "../..")
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "-f", image).Run() })
	docker(t, "volume", "create", volume)
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", volume).Run() })
	size := docker(t, "image", "inspect", "-f", "{{.Size}}", image)
	t.Logf("image size: %s bytes", size)

	// No password: the host reaches the container through Docker's
	// port forwarding, not its loopback, and is refused.
	addr := runImage(t, name+"-open", volume, image)
	if got := cli(t, addr, "", "PING"); !strings.HasPrefix(got, "DENIED ") {
		t.Errorf("PING without a password from outside the container = %q, want DENIED", got)
	}
	// docker top needs the pid column to find the container's processes.
	if got := strings.Fields(docker(t, "top", name+"-open", "-o", "uid,pid")); len(got) != 4 || got[2] != "65532" {
		t.Errorf("docker top -o uid,pid = %q, want the server alone, running as 65532", got)
	}
	stopImage(t, name+"-open")

	// With a password: the same volume, a new container.
	const password = "image-test-password"
	addr = runImage(t, name+"-auth", volume, image, "--requirepass", password)
	if got := cli(t, addr, "", "PING"); !strings.HasPrefix(got, "NOAUTH ") {
		t.Errorf("PING without the password = %q, want NOAUTH", got)
	}
	if got := cli(t, addr, password, "PING"); got != "PONG" {
		t.Errorf("PING with the password = %q", got)
	}
	// One unit an hour, burst 5: each call takes one of the 5 and none
	// comes back within the test, so the remaining count tells whether
	// the earlier calls were kept.
	throttle := func() string { return cli(t, addr, password, "CL.THROTTLE", "image:test", "4", "1", "3600", "1") }
	if got := throttle(); !strings.HasPrefix(got, "0\n5\n4\n-1\n") {
		t.Errorf("first CL.THROTTLE = %q, want allowed with 4 remaining", got)
	}
	stopImage(t, name+"-auth")
	addr = runImage(t, name+"-again", volume, image, "--requirepass", password)
	if got := throttle(); !strings.HasPrefix(got, "0\n5\n3\n-1\n") {
		t.Errorf("CL.THROTTLE in a new container on the volume = %q, want allowed with 3 remaining", got)
	}
	stopImage(t, name+"-again")
}

// docker runs the docker client and returns its trimmed standard output,
// failing t when it fails.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// runImage starts a container of image named name with volume on /data and
// port 6379 published on a free loopback port, waits until the server
// answers there (any reply), and returns that address. The test removes the
// container at its end.
func runImage(t *testing.T, name, volume, image string, args ...string) string {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := proc.Addr(port)
	docker(t, append([]string{"run", "-d", "--name", name, "-p", addr + ":6379", "-v", volume + ":/data", image}, args...)...)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	// Docker's forwarder accepts before the server listens and then drops
	// the connection; a reply is what tells the server is up.
	reply := regexp.MustCompile(`^(PONG|DENIED |NOAUTH )`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if reply.MatchString(cli(t, addr, "", "PING")) {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer on %s; its log:\n%s", name, addr, docker(t, "logs", name))
		}
	}
}

// stopImage stops the container as an operator does and checks the server
// shut down on SIGTERM: promptly, exit status 0, its shutdown in the log.
func stopImage(t *testing.T, name string) {
	t.Helper()
	const grace = 10 // seconds before docker stop sends SIGKILL
	start := time.Now()
	docker(t, "stop", "-t", strconv.Itoa(grace), name)
	took := time.Since(start)
	status := docker(t, "inspect", "-f", "{{.State.ExitCode}}", name)
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
	if status != "0" || took >= grace*time.Second/2 || !strings.Contains(string(logs), `msg="shutting down" signal=terminated`) {
		t.Errorf("docker stop %s: exit status %s after %v; its log:\n%s", name, status, took, logs)
	}
}

// cli runs redis-cli against addr, logged in with password unless it is
// empty, and returns its output: replies one a line, errors as their text.
func cli(t *testing.T, addr, password string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	full := []string{"-h", host, "-p", port}
	if password != "" {
		full = append(full, "--no-auth-warning", "-a", password)
	}
	out, err := exec.Command("redis-cli", append(full, args...)...).CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("redis-cli: %v", err)
	}
	return strings.TrimSpace(string(out))
}
