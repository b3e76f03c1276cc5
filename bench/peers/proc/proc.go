// Package proc starts and stops the peers' server processes (etcd members,
// PostgreSQL) for the benchmark: each writes its output to a log file, dies
// with the benchmark (SIGKILL on the parent's death, Linux), and is reaped
// by one goroutine.
package proc

import (
	"errors"
	"fmt"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is one running child process.
type Proc struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// Start runs bin with args, with env as its whole environment (nil: this
// process's), appending its output to logPath. cred, when not nil, runs it as another
// user.
func Start(bin string, args, env []string, logPath string, cred *syscall.Credential) (*Proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "=== proc: %s %v\n", bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if env != nil {
		cmd.Env = env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Proc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to be reaped.
func (p *Proc) Kill() error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// Stop sends SIGTERM, waits up to timeout, then kills.
func (p *Proc) Stop(timeout time.Duration) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return p.Kill()
	}
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, below the
// kernel's ephemeral range; see cluster.FreePorts.
func FreePorts(n int) ([]int, error) { return cluster.FreePorts(n) }
