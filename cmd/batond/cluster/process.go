package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one run of a node's batond. A goroutine started with it waits
// for the child and closes done; nothing else calls cmd.Wait, so a process
// is reaped exactly once whatever the caller does.
type process struct {
	cmd  *exec.Cmd
	out  *lineWriter // nil unless Config.Output is set
	done chan struct{}
	err  error // cmd.Wait's result; read only after done is closed

	mu       sync.Mutex
	expected bool // the harness asked for the exit (Kill, Stop, Wipe)
	paused   bool
}

// killWait bounds how long a SIGKILLed process may take to be reaped.
const killWait = 10 * time.Second

// startProcess launches binary with args and env, appending its stdout and
// stderr to logPath (and to out when non-nil). onExit runs on the waiting
// goroutine after the process has been reaped.
func startProcess(binary string, args, env []string, logPath string, out *lineWriter, onExit func(*process)) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: open log: %w", err)
	}
	fmt.Fprintf(logFile, "=== cluster: %s starting %s %q\n", time.Now().UTC().Format(time.RFC3339Nano), binary, args)

	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if out != nil {
		w := io.MultiWriter(logFile, out)
		cmd.Stdout, cmd.Stderr = w, w
	}
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 2 * time.Second // a grandchild holding the pipe must not block Wait
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("cluster: start %s: %w", binary, err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if out != nil {
			out.Flush()
		}
		fmt.Fprintf(logFile, "=== cluster: %s pid %d exited: %v\n", time.Now().UTC().Format(time.RFC3339Nano), cmd.Process.Pid, exitText(err))
		logFile.Close()
		p.err = err
		close(p.done)
		if onExit != nil {
			onExit(p)
		}
	}()
	return p, nil
}

// exited reports whether the process has been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wasExpected reports whether the harness asked for the exit.
func (p *process) wasExpected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expected
}

func (p *process) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// signal sends sig unless the process is gone already.
func (p *process) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("cluster: send %v to pid %d: %w", sig, p.cmd.Process.Pid, err)
	}
	return nil
}

// waitExit waits at most d for the process to be reaped.
func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *process) kill() error {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	if !p.waitExit(killWait) {
		return fmt.Errorf("cluster: pid %d not reaped %v after SIGKILL", p.cmd.Process.Pid, killWait)
	}
	return nil
}

// terminate sends SIGTERM (and SIGCONT, so a paused process can act on it),
// waits up to grace, then sends SIGQUIT, on which a Go program writes every
// goroutine's stack to its log (why it did not stop), and kills it if it
// is still there a second later.
func (p *process) terminate(grace time.Duration) error {
	p.mu.Lock()
	p.expected = true
	paused := p.paused
	p.paused = false
	p.mu.Unlock()
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if paused {
		if err := p.signal(syscall.SIGCONT); err != nil {
			return err
		}
	}
	if p.waitExit(grace) {
		return nil
	}
	if err := p.signal(syscall.SIGQUIT); err == nil && p.waitExit(quitWait) {
		return nil
	}
	return p.kill()
}

// quitWait is how long a process that ignored SIGTERM has to write its
// stacks after SIGQUIT.
const quitWait = time.Second

// pause sends SIGSTOP; resume sends SIGCONT.
func (p *process) pause() error  { return p.setPaused(true, syscall.SIGSTOP) }
func (p *process) resume() error { return p.setPaused(false, syscall.SIGCONT) }

func (p *process) setPaused(paused bool, sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.signal(sig); err != nil {
		return err
	}
	p.paused = paused
	return nil
}

// exitText describes cmd.Wait's result.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
