//go:build !unix

package procattr

import "syscall"

// Child returns nil: no special process attributes on this platform.
func Child() *syscall.SysProcAttr { return nil }
