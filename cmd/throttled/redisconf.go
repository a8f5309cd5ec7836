package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/resp"
)

// A config file is read as redis-server reads redis.conf: one directive a
// line, its arguments split as Redis splits them (blanks, "..." with C
// escapes, '...'), # comments, names in any case, later lines overriding
// earlier ones. A directive is a flag's name; include, which reads another
// file in place; or one of redisDirectives, Redis' own, accepted with a
// warning or refused. Anything else stops the start with redis-server's
// words and the file and line.

// multiArgFlags are the flags whose value is several redis.conf
// arguments, joined by spaces (bind 127.0.0.1 -::1).
var multiArgFlags = map[string]bool{"bind": true, "client-output-buffer-limit": true}

// commandLineOnly are flags that are not settings a file may give.
var commandLineOnly = map[string]string{
	"config":  "config is a command-line flag: include reads another file",
	"version": badDirective, "v": badDirective,
}

// redis-server's words for a bad line.
const (
	badDirective = "Bad directive or wrong number of arguments"
	wrongArgs    = "wrong number of arguments"
	unbalanced   = "Unbalanced quotes in configuration line"
	notAnInteger = "argument couldn't be parsed into an integer"
	notMemory    = "argument must be a memory value"
	notYesNo     = "argument must be 'yes' or 'no'"
	includeCycle = "include cycle: %s includes itself (through %s)"
)

// A configLineError is a config file line that stops the start.
type configLineError struct {
	file   string
	line   int
	text   string // the line as written, trimmed
	reason string
}

func (e *configLineError) Error() string {
	return fmt.Sprintf("%s:%d: '%s': %s", e.file, e.line, e.text, e.reason)
}

// redisReport is the error in redis-server's shape, with the file named.
func (e *configLineError) redisReport() string {
	return fmt.Sprintf("\n*** FATAL CONFIG FILE ERROR (throttled %s, Redis %s) ***\nReading the configuration file %s, at line %d\n>>> '%s'\n%s\n",
		commands.Version, commands.RedisVersion, e.file, e.line, e.text, e.reason)
}

// A configWarning is a line of Redis' that throttled accepts without
// doing what it says.
type configWarning struct {
	file    string
	line    int
	text    string
	instead string
}

func (w configWarning) log(l *slog.Logger) {
	l.Warn("config: directive without effect here", "file", w.file, "line", w.line, "directive", w.text, "instead", w.instead)
}

// applyConfigFile sets every flag named in the file (and the files it
// includes) that was not given on the command line, and returns the
// warnings to log once the logger exists.
func applyConfigFile(fs *flag.FlagSet, path string, onCommandLine map[string]bool) ([]configWarning, error) {
	r := &configReader{flags: fs, onCommandLine: onCommandLine}
	err := r.readFile(path)
	return r.warnings, err
}

// configReader reads one config file and the files it includes.
type configReader struct {
	flags         *flag.FlagSet
	onCommandLine map[string]bool
	warnings      []configWarning
	// reading are the files being read, the outermost first: including
	// one of them again would never end (redis-server crashes on it).
	// os.SameFile tells them apart whatever path or link names them, so
	// a chain of includes is as deep as the distinct files it names and
	// needs no depth limit of its own.
	reading []readingFile
}

type readingFile struct {
	name string
	info fs.FileInfo
}

func (r *configReader) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return openError(path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return openError(path, err)
	}
	for i, outer := range r.reading {
		if os.SameFile(outer.info, info) {
			var chain []string
			for _, o := range r.reading[i:] {
				chain = append(chain, o.name)
			}
			return errors.New("include cycle: " + strings.Join(append(chain, path), " includes "))
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return openError(path, err)
	}
	r.reading = append(r.reading, readingFile{path, info})
	defer func() { r.reading = r.reading[:len(r.reading)-1] }()
	for i, line := range strings.Split(string(data), "\n") {
		if err := r.line(path, i+1, strings.Trim(line, " \t\r\n")); err != nil {
			return err
		}
	}
	return nil
}

// openError words a file that does not open as redis-server does.
func openError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("can't open config file '%s': %v", path, err)
}

// line reads one line of file, trimmed.
func (r *configReader) line(file string, n int, text string) error {
	if text == "" || text[0] == '#' {
		return nil
	}
	fail := func(reason string) error { return &configLineError{file: file, line: n, text: text, reason: reason} }
	args, ok := resp.SplitArgs(text)
	if !ok {
		return fail(unbalanced)
	}
	if len(args) == 0 {
		return nil
	}
	name, values := strings.ToLower(args[0]), args[1:]
	if why, ok := commandLineOnly[name]; ok {
		return fail(why)
	}
	if f := r.flags.Lookup(name); f != nil {
		return r.set(f, values, fail)
	}
	if name == "include" {
		if len(values) != 1 {
			return fail(badDirective)
		}
		err := r.include(values[0])
		var inner *configLineError
		if err != nil && !errors.As(err, &inner) {
			return fail(err.Error())
		}
		return err
	}
	d, ok := redisDirectives[name]
	switch {
	case !ok:
		return fail(badDirective)
	case len(values) == 0:
		return fail(wrongArgs)
	case d.asksAsIs(values):
		return nil
	case d.refused:
		return fail(fmt.Sprintf("%s is not supported: %s", name, d.instead))
	}
	r.warnings = append(r.warnings, configWarning{file: file, line: n, text: text, instead: d.instead})
	return nil
}

// set gives flag f the line's values, unless the command line gave it.
func (r *configReader) set(f *flag.Flag, values []string, fail func(string) error) error {
	if len(values) == 0 || (len(values) > 1 && !multiArgFlags[f.Name]) {
		return fail(wrongArgs)
	}
	if r.onCommandLine[f.Name] {
		return nil
	}
	if err := r.flags.Set(f.Name, strings.Join(values, " ")); err != nil {
		return fail(valueReason(f, err))
	}
	return nil
}

// valueReason words a value that does not parse as redis-server does
// where it has words for it.
func valueReason(f *flag.Flag, err error) string {
	switch f.Value.(type) {
	case memFlag[int], memFlag[int64]:
		return notMemory
	case *yesNoFlag:
		return notYesNo
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64:
			return notAnInteger
		}
	}
	return err.Error()
}

// include reads the files that pattern names, as Redis does: a path
// relative to the working directory, and a pattern with * ? or [ reads
// every file it matches, in name order (none: nothing).
func (r *configReader) include(pattern string) error {
	if !strings.ContainsAny(pattern, "*?[") {
		return r.readFile(pattern)
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return fmt.Errorf("include %s: %v", pattern, err)
	}
	for _, p := range paths {
		if err := r.readFile(p); err != nil {
			return err
		}
	}
	return nil
}
