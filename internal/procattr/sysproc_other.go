//go:build unix && !linux

package procattr

import "syscall"

// Child puts the child in its own process group, so a terminal Ctrl-C
// goes to the runner only, which then stops the child itself.
func Child() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
