package persistence

import (
	"fmt"
	"log/slog"
	"strings"
)

// FsyncPolicy says when changes are forced to disk, with the meaning of
// Redis' appendfsync.
type FsyncPolicy uint8

// The policies. The zero value is EverySec, Redis' default.
const (
	// EverySec syncs the log about once a second when something was written;
	// a crash of the machine loses at most about the last second.
	EverySec FsyncPolicy = iota
	// Always syncs every group commit before WaitDurable returns; an
	// acknowledged change is never lost.
	Always
	// No never forces a sync (the operating system writes back when it
	// likes); a crash of the machine loses what the kernel had not written.
	No
)

// String returns the policy's appendfsync name.
func (p FsyncPolicy) String() string {
	switch p {
	case Always:
		return "always"
	case EverySec:
		return "everysec"
	case No:
		return "no"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", uint8(p))
}

// ParseFsync parses an appendfsync value ("always", "everysec", "no"; any
// case, as Redis' CONFIG SET accepts).
func ParseFsync(s string) (FsyncPolicy, error) {
	switch strings.ToLower(s) {
	case "always":
		return Always, nil
	case "everysec":
		return EverySec, nil
	case "no":
		return No, nil
	}
	return 0, fmt.Errorf("%w: appendfsync %q is not always, everysec or no", ErrBadOptions, s)
}

// Options configures Open. Zero fields mean the defaults.
type Options struct {
	// Dir is the folder that holds the database; it is created if missing.
	// Required.
	Dir string
	// Fsync is the sync policy (default EverySec).
	Fsync FsyncPolicy
	// Logger receives our warnings and Pebble's own messages (at Debug, its
	// errors at Warn). Default slog.Default().
	Logger *slog.Logger
	// Beside names files the caller keeps in Dir beside the database and
	// may have written before the first Open (a mesh node's incarnation):
	// a folder that holds only them is taken as empty.
	Beside []string
}

func (o *Options) validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: no folder given", ErrBadOptions)
	}
	if o.Fsync > No {
		return fmt.Errorf("%w: unknown fsync policy %d", ErrBadOptions, o.Fsync)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}
