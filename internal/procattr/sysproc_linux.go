package procattr

import "syscall"

// Child puts the child in its own process group (so a terminal Ctrl-C
// goes to the runner only, which then stops the child itself) and asks the
// kernel to SIGKILL it if the runner dies without cleaning up.
func Child() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
