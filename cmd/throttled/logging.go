package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
)

// logLevelFlag is --loglevel: slog's words, or Redis' for the same
// levels, so that a redis.conf line carries over. Redis' verbose (its
// "rarely useful" lines, such as an idle client closed) is throttled's
// debug, which logs such lines; notice is info, warning is warn, and
// nothing logs nothing.
type logLevelFlag struct {
	word  string
	level slog.Level
}

// levelNothing is above every level a line is logged at.
const levelNothing = slog.Level(math.MaxInt)

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
	"verbose": slog.LevelDebug, "notice": slog.LevelInfo, "warning": slog.LevelWarn, "nothing": levelNothing,
}

func (f *logLevelFlag) String() string { return f.word }

func (f *logLevelFlag) Set(v string) error {
	level, ok := logLevels[strings.ToLower(v)]
	if !ok {
		return errors.New("argument(s) must be one of the following: debug, info, warn, error, or Redis' debug, verbose, notice, warning, nothing")
	}
	f.word, f.level = v, level
	return nil
}

// newLogger logs at level to the file logfile names, or to stderr when
// it is "" (Redis' standard output: throttled keeps stdout for --help and
// --version, and systemd's journal and docker logs take both). A file that
// cannot be opened stops the start, as in Redis.
func newLogger(logfile string, level slog.Level, stderr io.Writer) (*slog.Logger, error) {
	w := stderr
	if logfile != "" {
		f, err := openLogFile(logfile)
		if err != nil {
			return nil, fmt.Errorf("--logfile: can't open the log file: %w", err)
		}
		f.Close()
		w = logFile(logfile)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// logFile appends each line to the file it names, opening it for that
// line as redis-server does: after logrotate renames the file, the next
// line starts a new one, with no signal to send. Log lines are few (a
// start, a shutdown, a warning), so the open costs nothing that matters.
type logFile string

func openLogFile(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
}

func (l logFile) Write(p []byte) (int, error) {
	f, err := openLogFile(string(l))
	if err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// writePIDFile writes this process' id to path, as redis-server does with
// pidfile; a failure is only logged, as there. The returned function
// removes the file at exit.
func writePIDFile(path string, log *slog.Logger) (remove func()) {
	if path == "" {
		return func() {}
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		log.Warn("failed to write the PID file", "pidfile", path, "err", err)
		return func() {}
	}
	return func() { os.Remove(path) }
}
