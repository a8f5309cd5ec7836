package harness

import (
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestPartFlags(t *testing.T) {
	parse := func(args ...string) (PartFlags, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var p PartFlags
		p.Register(fs, args, []string{"a", "b"})
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return p, p.Parse(fs)
	}
	p, err := parse("-skip", "b", "-runs", "5")
	if err != nil || !slices.Equal(p.Pipelines, []int{1, 16}) || !p.Skip["b"] || p.Skip["a"] || p.Runs != 5 ||
		!slices.Equal(p.Argv, []string{"-skip", "b", "-runs", "5"}) {
		t.Errorf("PartFlags = %+v, %v", p, err)
	}
	for args, want := range map[string]string{
		"-P 0":      "-P: bad pipeline depth",
		"-skip c":   "-skip: unknown part",
		"-P 1 more": `unexpected arguments ["more"]`,
	} {
		if _, err := parse(strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", args, err, want)
		}
	}
}

func TestLookPaths(t *testing.T) {
	if err := LookPaths("go"); err != nil {
		t.Errorf("LookPaths(go) = %v", err)
	}
	if err := LookPaths("go", "no-such-binary-here"); err == nil || !strings.Contains(err.Error(), "no-such-binary-here") {
		t.Errorf("LookPaths with a missing binary = %v", err)
	}
}

func TestHeadingAndLogf(t *testing.T) {
	var b strings.Builder
	Heading(&b, "Title", "go run ./bench/x ")
	Logf(&b)("%d runs", 3)
	want := regexp.MustCompile("^## Title\n\n- Command: `go run ./bench/x`\n- Date: \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\n3 runs\n$")
	if !want.MatchString(b.String()) {
		t.Errorf("got %q", b.String())
	}
}
