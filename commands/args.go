package commands

import (
	"bytes"

	"github.com/throttleddb/throttled/store"
)

// parseInt parses an integer argument with Redis' rules.
func parseInt(b []byte) (int64, bool) { return store.ParseInt(b) }

// is reports whether arg equals the keyword kw (upper case), ignoring ASCII
// case.
func is(arg []byte, kw string) bool { return bytes.EqualFold(arg, []byte(kw)) }
