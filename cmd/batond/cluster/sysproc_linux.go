package cluster

import "syscall"

// sysProcAttr puts each node in its own process group, so a terminal's
// Ctrl-C reaches only the harness (which then stops the nodes in order), and
// has the kernel SIGKILL the node if the harness dies without Close.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
