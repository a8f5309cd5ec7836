package harness

import (
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// The pieces of a benchmark program's command line and report that the
// programs with parts (bench/raft, bench/crdt, bench/persist) share.

// ParseParts finishes reading a command line once fs has parsed it: no
// arguments may be left, pipelines is a -P flag's value and skip a -skip
// flag's, out of parts.
func ParseParts(fs *flag.FlagSet, pipelines, skip string, parts []string) ([]int, map[string]bool, error) {
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	p, err := ParsePipelines(pipelines)
	if err != nil {
		return nil, nil, err
	}
	s, err := ParseSkip(skip, parts)
	if err != nil {
		return nil, nil, err
	}
	return p, s, nil
}

// Logf writes a line of progress to w.
func Logf(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
}

// LookPaths fails unless every one of bins is on PATH.
func LookPaths(bins ...string) error {
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			return err
		}
	}
	return nil
}

// Heading writes a report's title and its first two items: the command
// that ran it and the date.
func Heading(w io.Writer, title, command string) {
	fmt.Fprintf(w, "## %s\n\n", title)
	fmt.Fprintf(w, "- Command: `%s`\n", strings.TrimSpace(command))
	fmt.Fprintf(w, "- Date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
}
