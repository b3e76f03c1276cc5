package netns

import "syscall"

// childAttr has the kernel kill a child this process starts when it dies.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
