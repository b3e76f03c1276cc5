package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A delayer delays the packets a member sends where the kernel has no
// netem: an iptables rule hands each packet of the member's eth0 to an
// NFQUEUE, and the delayer, bound to that queue in the member's namespace,
// lets each one go (an NF_ACCEPT verdict) once it has waited the delay,
// in the order they came. The packets wait in the kernel; only their ids
// and times come here. The queue fails open (a full queue lets packets
// pass), and the rule bypasses the queue when nobody is bound to it.
//
// The netlink messages are those of linux/netfilter/nfnetlink_queue.h.

const (
	nfnlSubsysQueue   = 3
	nfqnlMsgPacket    = nfnlSubsysQueue << 8
	nfqnlMsgConfig    = nfnlSubsysQueue<<8 | 2
	nfqnlMsgVerdictB  = nfnlSubsysQueue<<8 | 3 // verdict on every id up to one
	nfqaPacketHdr     = 1
	nfqaVerdictHdr    = 2
	nfqaCfgCmd        = 1
	nfqaCfgParams     = 2
	nfqaCfgQueueMax   = 3
	nfqaCfgMask       = 4
	nfqaCfgFlags      = 5
	nfqnlCfgCmdBind   = 1
	nfqnlCfgCmdUnbind = 2
	nfqnlCopyMeta     = 1
	nfqaCfgFFailOpen  = 1
	nfAccept          = 1
	nlmsgError        = 2
	nlmsgHdrLen       = 16
	nfgenHdrLen       = 4
)

type delayer struct {
	fd    int
	queue uint16
	delay time.Duration

	mu   sync.Mutex
	held []heldPacket // in arrival order
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
	seq  atomic.Uint32
	sent atomic.Int64 // packets delayed and let go
}

type heldPacket struct {
	id uint32
	at time.Time
}

// openDelayer binds queue in namespace ns and starts delaying what comes.
func openDelayer(ns string, queue uint16, d time.Duration) (*delayer, error) {
	if sysSetns < 0 {
		return nil, fmt.Errorf("netns: no setns on %s", runtime.GOARCH)
	}
	fd, err := netlinkIn(ns)
	if err != nil {
		return nil, err
	}
	q := &delayer{fd: fd, queue: queue, delay: d, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	tv := syscall.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("netns: nfqueue: %w", err)
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<20)
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	steps := [][][]byte{
		{attr(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, syscall.AF_INET})},
		{attr(nfqaCfgParams, append(be32(0), nfqnlCopyMeta)), attr(nfqaCfgQueueMax, be32(8192)),
			attr(nfqaCfgMask, be32(nfqaCfgFFailOpen)), attr(nfqaCfgFlags, be32(nfqaCfgFFailOpen))},
	}
	for _, attrs := range steps {
		if err := q.request(nfqnlMsgConfig, attrs...); err != nil {
			syscall.Close(fd)
			return nil, err
		}
	}
	q.wg.Add(2)
	go q.read()
	go q.release()
	return q, nil
}

// netlinkIn opens a netfilter netlink socket in namespace ns.
func netlinkIn(ns string) (int, error) {
	fd := -1
	err := inNamespace(ns, func() error {
		var err error
		fd, err = syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_NETFILTER)
		if err == nil {
			if err = syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
				syscall.Close(fd)
			}
		}
		if err != nil {
			return fmt.Errorf("netns: netlink socket in %s: %w", ns, err)
		}
		return nil
	})
	return fd, err
}

// inNamespace runs fn on a thread of its own moved into namespace ns, then
// moves the thread back and gives it back to the runtime. A thread must not
// end with its goroutine (as one left locked does): the kernel SIGKILLs
// every child that thread forked with Pdeathsig set (golang/go#27505),
// which the cluster's members are, so a delay fault once killed all three
// members of a chaos run at once. Only when the thread cannot go back does
// it stay locked and end, in the namespace it is in.
func inNamespace(ns string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("netns: this thread's namespace: %w", err)
			return
		}
		defer home.Close()
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("netns: %w", err)
			return
		}
		defer f.Close()
		if _, _, e := syscall.RawSyscall(uintptr(sysSetns), f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("netns: setns %s: %w", ns, e)
			return
		}
		err = fn()
		if _, _, e := syscall.RawSyscall(uintptr(sysSetns), home.Fd(), syscall.CLONE_NEWNET, 0); e == 0 {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// attr is one netlink attribute, padded to 4 bytes.
func attr(typ uint16, payload []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(payload)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// message is a netlink message of the queue subsystem for q's queue.
func (q *delayer) message(typ uint16, flags uint16, attrs ...[]byte) []byte {
	n := nlmsgHdrLen + nfgenHdrLen
	for _, a := range attrs {
		n += len(a)
	}
	b := binary.NativeEndian.AppendUint32(nil, uint32(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, syscall.NLM_F_REQUEST|flags)
	b = binary.NativeEndian.AppendUint32(b, q.seq.Add(1))
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, syscall.AF_UNSPEC, 0)
	b = binary.BigEndian.AppendUint16(b, q.queue)
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

// request sends a configuration message and waits for its acknowledgement
// (before the reader runs).
func (q *delayer) request(typ uint16, attrs ...[]byte) error {
	if err := syscall.Sendto(q.fd, q.message(typ, syscall.NLM_F_ACK, attrs...), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("netns: nfqueue config: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := syscall.Recvfrom(q.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("netns: nfqueue config answer: %w", err)
		}
		for b := buf[:n]; len(b) >= nlmsgHdrLen; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < nlmsgHdrLen || l > len(b) {
				break
			}
			if binary.NativeEndian.Uint16(b[4:]) == nlmsgError && l >= nlmsgHdrLen+4 {
				if code := int32(binary.NativeEndian.Uint32(b[nlmsgHdrLen:])); code != 0 {
					return fmt.Errorf("netns: nfqueue config: %w", syscall.Errno(-code))
				}
				return nil
			}
			b = b[(l+3)&^3:]
		}
	}
}

// read takes the queued packets' ids as they come.
func (q *delayer) read() {
	defer q.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-q.stop:
			return
		default:
		}
		n, _, err := syscall.Recvfrom(q.fd, buf, 0)
		if err != nil {
			continue // a timeout (to look at stop), or ENOBUFS: the queue fails open
		}
		now := time.Now()
		for b := buf[:n]; len(b) >= nlmsgHdrLen; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < nlmsgHdrLen || l > len(b) {
				break
			}
			if binary.NativeEndian.Uint16(b[4:]) == nfqnlMsgPacket {
				if id, ok := packetID(b[nlmsgHdrLen+nfgenHdrLen : l]); ok {
					q.mu.Lock()
					q.held = append(q.held, heldPacket{id, now})
					q.mu.Unlock()
					select {
					case q.wake <- struct{}{}:
					default:
					}
				}
			}
			b = b[(l+3)&^3:]
		}
	}
}

// packetID finds NFQA_PACKET_HDR's packet id among attrs.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[(l+3)&^3:]
	}
	return 0, false
}

// release lets each packet go once it has waited the delay; on stop, it
// lets every packet still held go at once.
func (q *delayer) release() {
	defer q.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		q.mu.Lock()
		now := time.Now()
		due, last, next := 0, uint32(0), time.Duration(-1)
		for due < len(q.held) && !q.held[due].at.Add(q.delay).After(now) {
			last = q.held[due].id
			due++
		}
		if due < len(q.held) {
			next = q.held[due].at.Add(q.delay).Sub(now)
		}
		q.held = q.held[due:]
		q.mu.Unlock()
		if due > 0 {
			q.accept(last, due)
		}
		if next >= 0 {
			t.Reset(next)
		}
		select {
		case <-q.stop:
			q.mu.Lock()
			held := q.held
			q.held = nil
			q.mu.Unlock()
			if len(held) > 0 {
				q.accept(held[len(held)-1].id, len(held))
			}
			return
		case <-q.wake:
		case <-t.C:
		}
	}
}

// accept lets every packet up to id go (ids rise in queue order).
func (q *delayer) accept(id uint32, count int) {
	hdr := binary.BigEndian.AppendUint32(nil, nfAccept)
	hdr = binary.BigEndian.AppendUint32(hdr, id)
	if syscall.Sendto(q.fd, q.message(nfqnlMsgVerdictB, 0, attr(nfqaVerdictHdr, hdr)), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}) == nil {
		q.sent.Add(int64(count))
	}
}

// close lets every held packet go, unbinds the queue and closes the
// socket. Call it once the iptables rule is gone, so that no packet comes.
func (q *delayer) close() error {
	close(q.stop)
	q.wg.Wait()
	err := syscall.Sendto(q.fd, q.message(nfqnlMsgConfig, 0, attr(nfqaCfgCmd, []byte{nfqnlCfgCmdUnbind, 0, 0, syscall.AF_INET})), 0,
		&syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
	return errors.Join(err, syscall.Close(q.fd))
}
