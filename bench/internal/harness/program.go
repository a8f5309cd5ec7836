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

// PartFlags are the flags bench/crdt, bench/raft and bench/persist have
// alike: the pipeline depths, how often each measurement is repeated and
// the parts of the run to skip.
type PartFlags struct {
	Pipelines []int           // -P
	Runs      int             // -runs
	Skip      map[string]bool // -skip, out of the program's parts
	Argv      []string        // the command line as given, for the report

	pipelines, skip string
	parts           []string
}

// Register defines -P, -runs and -skip on fs (parts are what -skip may
// name) and keeps args, the command line fs will parse.
func (p *PartFlags) Register(fs *flag.FlagSet, args, parts []string) {
	p.Argv, p.parts = args, parts
	fs.StringVar(&p.pipelines, "P", "1,16", "comma-separated pipeline depths")
	fs.IntVar(&p.Runs, "runs", 3, "repeat each throughput measurement this many times and report the median")
	fs.StringVar(&p.skip, "skip", "", "comma-separated parts to skip: "+strings.Join(parts, ","))
}

// Parse finishes reading the command line once fs has parsed it: no
// arguments may be left, and -P and -skip must be well formed.
func (p *PartFlags) Parse(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if p.Pipelines, err = ParsePipelines(p.pipelines); err != nil {
		return err
	}
	p.Skip, err = ParseSkip(p.skip, p.parts)
	return err
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
