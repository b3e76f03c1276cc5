// Package faults decides which faults a chaos run injects, from its seed,
// and injects them into a cluster of real batond processes
// (cmd/batond/cluster).
//
// # Contracts
//
//   - Schedule is a pure function of its arguments: the same seed gives the
//     same faults at the same offsets with the same holds and target roles.
//     Which process plays a role (the leader, a follower) is resolved when
//     the fault is injected, since leadership is not predictable.
//   - Faults of one schedule never overlap: each is healed before the next
//     starts, so a run never loses quorum for good.
//   - Consecutive seeds rotate through the kinds: fault j of the run with
//     seed s is Kinds[(s*k + j) mod len(Kinds)] (k faults per run), so a
//     few consecutive runs cover every kind.
package faults

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a type of fault.
type Kind string

// The kinds of fault.
const (
	// Kill crashes a node with SIGKILL and restarts it after the hold.
	Kill Kind = "kill"
	// Pause freezes a node with SIGSTOP and continues it after the hold: a
	// paused leader wakes up believing it still leads.
	Pause Kind = "pause"
	// IsolateLeader cuts the leader's Raft links both ways.
	IsolateLeader Kind = "isolate-leader"
	// CutPair partitions two nodes from each other, both ways.
	CutPair Kind = "cut"
	// OneWay cuts one direction between the leader and a follower.
	OneWay Kind = "one-way"
	// Split partitions the cluster into a majority and a minority (2|1,
	// 3|2), with the leader on either side.
	Split Kind = "split"
	// ClockSkew runs one node's clock ahead and another's behind and moves
	// the leadership between them, so leases are stamped by both.
	ClockSkew Kind = "clock-skew"
	// WipeRejoin kills a follower, deletes its data, removes it from the
	// membership and has it join again as a new member.
	WipeRejoin Kind = "wipe-rejoin"

	// The kinds below exist only in the network (chaos/netns): a run with
	// Injector.Network.

	// Loss drops a share of the packets one way between the leader and a
	// follower (Fault.LossPct).
	Loss Kind = "loss"
	// Delay delays what one node sends (Fault.Delay).
	Delay Kind = "delay"
	// Flap takes one node's link down and up again (Fault.FlapPeriod).
	Flap Kind = "flap"
)

// Kinds are the kinds of a run whose faults go through failpoints, in
// rotation order.
var Kinds = []Kind{Kill, Pause, IsolateLeader, CutPair, OneWay, Split, ClockSkew, WipeRejoin}

// NetKinds are the kinds of a run in network namespaces, in rotation
// order: every fault of the network (the partitions of Kinds are then made
// in the network too).
var NetKinds = []Kind{IsolateLeader, Loss, CutPair, Delay, OneWay, Flap, Split}

// AllKinds are every kind: Kinds, then the kinds only the network makes.
var AllKinds = []Kind{Kill, Pause, IsolateLeader, CutPair, OneWay, Split, ClockSkew, WipeRejoin, Loss, Delay, Flap}

// NetOnly reports whether k needs a run in network namespaces.
func NetOnly(k Kind) bool { return k == Loss || k == Delay || k == Flap }

// ParseKinds parses a comma-separated list of kinds; "" or "all" is Kinds,
// "net" is NetKinds.
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return Kinds, nil
	}
	if s == "net" {
		return NetKinds, nil
	}
	var out []Kind
	for _, part := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(part))
		found := false
		for _, known := range AllKinds {
			if k == known {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("faults: unknown kind %q (known: %v)", k, Kinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// Fault is one planned fault.
type Fault struct {
	Kind Kind
	// At is when it starts, from the start of traffic; Hold how long it
	// lasts before it is healed.
	At, Hold time.Duration
	// OnLeader: the fault hits the leader (for a split: the leader is on
	// the minority side); otherwise a follower.
	OnLeader bool
	// Pick chooses among candidate nodes (pick mod count).
	Pick int
	// Skew is the clock offset of a ClockSkew fault: the leader runs Skew
	// ahead (or behind, when negative) and another node the opposite.
	Skew time.Duration
	// LossPct is the share of packets a Loss fault drops, 20 to 100.
	LossPct int
	// Delay is how long a Delay fault delays each packet.
	Delay time.Duration
	// FlapPeriod is a Flap fault's period: its link is down half of it.
	FlapPeriod time.Duration
}

func (f Fault) String() string {
	role := "follower"
	if f.OnLeader {
		role = "leader"
	}
	s := fmt.Sprintf("%s on %s at %v for %v", f.Kind, role, f.At, f.Hold)
	switch f.Kind {
	case ClockSkew:
		s += fmt.Sprintf(" skew %v", f.Skew)
	case Loss:
		s += fmt.Sprintf(" %d%%", f.LossPct)
	case Delay:
		s += fmt.Sprintf(" by %v", f.Delay)
	case Flap:
		s += fmt.Sprintf(" every %v", f.FlapPeriod)
	}
	return s
}

// Plan is the input of Schedule.
type Plan struct {
	Seed int64
	// Traffic is how long the workload runs; faults start after a second of
	// calm and are all healed a second before it ends.
	Traffic time.Duration
	// PerRun is the number of faults (at most; fewer when they do not fit).
	PerRun int
	// Kinds to draw from; nil means Kinds.
	Kinds []Kind
}

// Schedule returns the faults of one run.
func Schedule(p Plan) []Fault {
	kinds := p.Kinds
	if len(kinds) == 0 {
		kinds = Kinds
	}
	rng := rand.New(rand.NewPCG(uint64(p.Seed), 0x6661756c7473))
	at := 800*time.Millisecond + jitter(rng, 700*time.Millisecond)
	end := p.Traffic - time.Second
	var out []Fault
	for j := 0; j < p.PerRun; j++ {
		idx := (int(p.Seed%int64(len(kinds)))*p.PerRun + j) % len(kinds)
		if idx < 0 {
			idx += len(kinds)
		}
		f := Fault{Kind: kinds[idx], At: at, OnLeader: rng.IntN(2) == 0, Pick: rng.IntN(1 << 20)}
		f.Hold = 800*time.Millisecond + jitter(rng, 1200*time.Millisecond)
		switch f.Kind {
		case Pause:
			// Long enough for an election (300ms timeouts) and for leases
			// held by agents to run out.
			f.Hold = time.Second + jitter(rng, 1200*time.Millisecond)
		case ClockSkew:
			f.Skew = time.Duration(1000+rng.IntN(4000)) * time.Millisecond
			if rng.IntN(2) == 0 {
				f.Skew = -f.Skew
			}
			f.Hold = 1500*time.Millisecond + jitter(rng, time.Second)
		case IsolateLeader:
			f.OnLeader = true
		case WipeRejoin:
			f.OnLeader = false
		case Loss:
			f.LossPct = 20 + 10*rng.IntN(9)
		case Delay:
			f.Delay = time.Duration(50+rng.IntN(300)) * time.Millisecond
		case Flap:
			f.FlapPeriod = time.Duration(200+rng.IntN(600)) * time.Millisecond
		}
		if f.At+f.Hold > end {
			break
		}
		out = append(out, f)
		at = f.At + f.Hold + 300*time.Millisecond + jitter(rng, 700*time.Millisecond)
	}
	return out
}

func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}
