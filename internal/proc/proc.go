// Package proc starts and stops server processes (throttled, redis-server)
// on free loopback ports, for the benchmarks and the compat tests.
package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/throttleddb/throttled/internal/procattr"
	"github.com/throttleddb/throttled/internal/respconn"
)

// FreePort asks the OS for a free TCP port on 127.0.0.1 (listen on :0, close,
// return the port). Another process could take it before it is used; the
// window is short and a clash shows up as a server that fails to start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a running server.
type Process struct {
	Name string // for messages: "throttled", "redis-server"
	Addr string // host:port it listens on

	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited and been waited for
	err  error         // Wait's result, valid after done is closed

	stopOnce sync.Once
}

// Config describes a server process to start.
type Config struct {
	Name string   // for messages: "throttled", "redis-server"
	Path string   // binary
	Args []string // its arguments
	Addr string   // host:port it will listen on
	Dir  string   // working directory; "" for the caller's
	// Wrap, when set, is a command that runs the server (e.g. taskset -c 0):
	// the process started is Wrap[0] with Wrap[1:], Path and Args.
	Wrap    []string
	Timeout time.Duration // how long it may take to be ready
	// Ready is one probe of whether the server is up; nil means it answers
	// PING on Addr (RESP). A server that does not speak RESP, such as etcd,
	// sets its own.
	Ready func(ctx context.Context) error
}

// Start runs the server and waits (up to c.Timeout) for it to be ready: to
// answer PING on c.Addr, or c.Ready to pass. The process gets its own process group, so a Ctrl-C in the
// terminal reaches only the caller, which then stops it with Stop; on Linux
// it is also killed if the caller dies. On error the process is already
// stopped and the error includes its output.
func Start(ctx context.Context, c Config) (*Process, error) {
	name, argv := CommandLine(c.Wrap, c.Path, c.Args)
	p := &Process{
		Name: c.Name,
		Addr: c.Addr,
		cmd:  exec.Command(name, argv...),
		out:  &tailBuffer{max: 64 << 10},
		done: make(chan struct{}),
	}
	p.cmd.Dir = c.Dir
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = procattr.Child()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	ready := c.Ready
	if ready == nil {
		ready = func(ctx context.Context) error { return respconn.Ping(ctx, c.Addr) }
	}
	if err := WaitReady(ctx, c.Addr, c.Timeout, p.done, ready); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("%s (%s): %w\n--- %s output ---\n%s", c.Name, p.CommandLine(), err, c.Name, p.Output())
	}
	return p, nil
}

// WaitReady calls probe every 10 ms until it passes, ctx is done, the timeout
// passes, or exited (may be nil) is closed because the server process is
// gone. what names the server in the error.
func WaitReady(ctx context.Context, what string, timeout time.Duration, exited <-chan struct{}, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = probe(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v: %w (last: %v)", what, timeout, ctx.Err(), last)
		case <-exited:
			return fmt.Errorf("server process exited before %s was ready (last: %v)", what, last)
		case <-tick.C:
		}
	}
}

// CommandLine is the command that was run, for messages.
func (p *Process) CommandLine() string {
	return strings.Join(p.cmd.Args, " ")
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Output returns the last 64 KiB the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.String() }

// Stop asks the process to exit (SIGTERM), kills it (SIGKILL) if it is still
// running after 5 s, and waits for it. It is safe to call more than once and
// from several goroutines. The error reports an unclean exit; a process that
// was already gone, or exited because of our SIGTERM, is not an error.
func (p *Process) Stop() error {
	var err error
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			err = p.exitErr(false)
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			err = p.exitErr(true)
			return
		case <-time.After(5 * time.Second):
		}
		_ = p.cmd.Process.Kill()
		<-p.done
		err = fmt.Errorf("%s did not exit within 5s of SIGTERM; killed", p.Name)
	})
	return err
}

// Kill kills the process at once (SIGKILL), as a crash would, and waits for
// it. A later Stop does nothing.
func (p *Process) Kill() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// Pid returns the process id (of Wrap's command when there is one).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

func (p *Process) exitErr(signalled bool) error {
	if p.err == nil {
		return nil
	}
	var ee *exec.ExitError
	if signalled && errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return fmt.Errorf("%s exited: %w", p.Name, p.err)
}

// Addr formats a loopback address for port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// CommandLine returns the program and arguments that run path with args,
// under wrap when it is not empty: wrap "taskset -c 0" gives taskset and
// "-c 0 path args...".
func CommandLine(wrap []string, path string, args []string) (string, []string) {
	if len(wrap) == 0 {
		return path, args
	}
	return wrap[0], append(append(slices.Clone(wrap[1:]), path), args...)
}
