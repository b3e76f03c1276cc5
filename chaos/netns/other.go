//go:build !linux

package netns

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"
)

// Network namespaces are Linux's: elsewhere Check fails (no ip) and
// nothing below runs.

type delayer struct{ sent atomic.Int64 }

func openDelayer(string, uint16, time.Duration) (*delayer, error) {
	return nil, errors.New("netns: NFQUEUE is Linux's")
}

func (*delayer) close() error { return nil }

func childAttr() *syscall.SysProcAttr { return nil }
