package netns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Loss drops pct percent (1 to 100) of the packets member from sends to
// member to, at random: one-way loss (100 is a one-way cut). Replies to
// to's connections are lost too, as on a real link.
func (n *Net) Loss(ctx context.Context, from, to, pct int) error {
	if err := n.check(from, to); err != nil {
		return err
	}
	if pct < 1 || pct > 100 {
		return fmt.Errorf("netns: loss of %d%%, want 1 to 100", pct)
	}
	args := []string{"iptables", "-w", "-A", "OUTPUT", "-d", n.Host(to)}
	if pct < 100 {
		args = append(args, "-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(float64(pct)/100, 'f', 2, 64))
	}
	return n.inMember(ctx, from, append(args, "-j", "DROP")...)
}

// Cut drops everything member from sends to member to.
func (n *Net) Cut(ctx context.Context, from, to int) error { return n.Loss(ctx, from, to, 100) }

// Partition cuts, both ways, every pair of members in different groups.
// Members in no group are left alone.
func (n *Net) Partition(ctx context.Context, groups ...[]int) error {
	for gi, g := range groups {
		for _, i := range g {
			for gj, h := range groups {
				if gi == gj {
					continue
				}
				for _, j := range h {
					if err := n.Cut(ctx, i, j); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// Isolate cuts member i from every other member, both ways.
func (n *Net) Isolate(ctx context.Context, i int) error {
	var rest []int
	for j := range n.nodes {
		if j != i {
			rest = append(rest, j)
		}
	}
	return n.Partition(ctx, []int{i}, rest)
}

// Delay delays every packet member i sends by d, and returns how: with
// netem where the kernel has it; else by holding each packet in an NFQUEUE
// for d (delay_linux.go); else, where no queue can be bound, with a token
// bucket whose queue delays what exceeds its rate, up to d: a slow link.
func (n *Net) Delay(ctx context.Context, i int, d time.Duration) (string, error) {
	if err := n.check(i, i); err != nil {
		return "", err
	}
	ms := strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
	if n.netem {
		return "netem", n.inMember(ctx, i, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", ms)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.delays[i] != nil {
		return "", fmt.Errorf("netns: member %d is delayed already", i+1)
	}
	queue := uint16(100 + i)
	q, qerr := openDelayer(n.Member(i), queue, d)
	if qerr == nil {
		err := n.inMember(ctx, i, "iptables", "-w", "-A", "OUTPUT", "-o", "eth0", "-j", "NFQUEUE",
			"--queue-num", strconv.Itoa(int(queue)), "--queue-bypass")
		if err != nil {
			q.close()
			return "", err
		}
		n.delays[i] = q
		return "nfqueue", nil
	}
	err := n.inMember(ctx, i, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
		"rate", "256kbit", "burst", "1540", "latency", ms)
	return "tbf: " + qerr.Error(), err
}

// Delayed is how many packets NFQUEUE delays have held and let go.
func (n *Net) Delayed() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	total := n.delayed
	for _, q := range n.delays {
		total += q.sent.Load()
	}
	return total
}

// Flap takes member i's link down and up again every period (down for half
// of it) until Heal.
func (n *Net) Flap(ctx context.Context, i int, period time.Duration) error {
	if err := n.check(i, i); err != nil {
		return err
	}
	if period < 20*time.Millisecond {
		return fmt.Errorf("netns: flap period %v, want at least 20ms", period)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.flaps[i] != nil {
		return fmt.Errorf("netns: member %d already flaps", i+1)
	}
	if err := n.link(ctx, i, "down"); err != nil {
		return err
	}
	f := &flap{stop: make(chan struct{}), done: make(chan struct{})}
	n.flaps[i] = f
	go func() {
		defer close(f.done)
		t := time.NewTicker(period / 2)
		defer t.Stop()
		up := false
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
			}
			up = !up
			state := "down"
			if up {
				state = "up"
			}
			_ = n.link(context.Background(), i, state) // Heal brings it up whatever happened
		}
	}()
	return nil
}

func (n *Net) link(ctx context.Context, i int, state string) error {
	return n.run(ctx, n.ip, "-n", n.NS(), "link", "set", port(i), state)
}

func (n *Net) stopFlaps() {
	n.mu.Lock()
	flaps := n.flaps
	n.flaps = map[int]*flap{}
	n.mu.Unlock()
	for _, f := range flaps {
		close(f.stop)
		<-f.done
	}
}

// Heal undoes every fault: stops flapping, brings every link up, flushes
// every member's iptables rules and removes its qdisc. It tries every step
// and returns the first errors.
func (n *Net) Heal(ctx context.Context) error {
	n.stopFlaps()
	var errs []error
	for i := range n.nodes {
		if err := n.link(ctx, i, "up"); err != nil {
			errs = append(errs, err)
		}
		if err := n.inMember(ctx, i, "iptables", "-w", "-F", "OUTPUT"); err != nil {
			errs = append(errs, err)
		}
		// "tc qdisc del" fails when there is none: show first, then delete.
		if err := n.inMember(ctx, i, "sh", "-c", "tc qdisc show dev eth0 root | grep -qE 'netem|tbf' || exit 0; tc qdisc del dev eth0 root"); err != nil {
			errs = append(errs, err)
		}
	}
	// The NFQUEUE rules are gone: let what the queues hold go.
	n.mu.Lock()
	for i, q := range n.delays {
		if err := q.close(); err != nil {
			errs = append(errs, err)
		}
		n.delayed += q.sent.Load()
		delete(n.delays, i)
	}
	n.mu.Unlock()
	return errors.Join(errs...)
}

func (n *Net) check(nodes ...int) error {
	for _, i := range nodes {
		if i < 0 || i >= n.nodes {
			return fmt.Errorf("netns: no member %d of %d", i+1, n.nodes)
		}
	}
	return nil
}
