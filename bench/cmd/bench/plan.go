package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/baton"
	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
)

// plan is what one suite run does: the sizes and timings of every
// workload, the same for every system.
type plan struct {
	warmup, duration time.Duration
	// rounds is how many times cas, queue, sdk and langgraph run,
	// interleaved across the systems (round 1: Baton then its peers; round
	// 2: the next system first; ...; sdk, Baton's alone, alternates which
	// SDK goes first), so that a slow minute of a shared machine falls on
	// one round of one system and the report can take each system's median.
	rounds          int
	casClients      []int
	queueWorkers    []int
	queuePreload    int
	handoff         baton.HandoffParams
	recoveryClients int
	kills           loadgen.KillSchedule
	scale           baton.ScaleParams
	scaleWarmup     time.Duration
	scaleDuration   time.Duration
	// soak is cas C=soak.Clients for soakWarmup+soakDuration (30 min in
	// all; quick: 3), memory sampled every soak.SampleEvery. The
	// --warmup and --duration overrides leave it alone; --soak-duration
	// sets its whole length.
	soak         baton.SoakParams
	soakWarmup   time.Duration
	soakDuration time.Duration
	// sdkClients are the sdk workload's client counts: the cas operation
	// through the Python SDK and the Go SDK (issue 28).
	sdkClients []int
	// lgThreads are the langgraph workload's concurrent LangGraph threads,
	// each a conversation of lgSteps steps (issue 29).
	lgThreads []int
	lgSteps   int
	// artifactSize is the artifacts workload's artifact (issue 34).
	artifactSize int64
}

// fullPlan is `make bench`: the conditions of the goals.
func fullPlan() plan {
	return plan{
		warmup: 5 * time.Second, duration: 12 * time.Second, rounds: 3,
		casClients:   []int{1, 64, 256},
		queueWorkers: []int{64},
		// Enough that no system drains the queue within warm-up and window.
		queuePreload:    240_000,
		handoff:         baton.HandoffParams{AgentsPerStage: 8, Pipelines: 20_000, ArtifactSize: 4096},
		recoveryClients: 64,
		kills:           loadgen.KillSchedule{First: 10 * time.Second, Period: 10 * time.Second, Down: 2 * time.Second, Count: 5},
		scale: baton.ScaleParams{Tasks: 1_000_000, KVEntries: 100_000, Threads: 10_000, CheckpointsPerThread: 20,
			SmallTasks: 1_000, Workers: 16, SnapshotWait: 3 * time.Minute},
		scaleWarmup: 2 * time.Second, scaleDuration: 10 * time.Second,
		soak:       baton.SoakParams{Clients: 64, SampleEvery: 10 * time.Second},
		soakWarmup: 5 * time.Second, soakDuration: 30*time.Minute - 5*time.Second,
		sdkClients: []int{1, 64},
		lgThreads:  []int{1, 32}, lgSteps: 20,
		artifactSize: 1 << 30,
	}
}

// quickPlan is `make bench QUICK=1`: every workload, briefly.
func quickPlan() plan {
	return plan{
		warmup: time.Second, duration: 4 * time.Second, rounds: 1,
		casClients:      []int{1, 64, 256},
		queueWorkers:    []int{64},
		queuePreload:    40_000,
		handoff:         baton.HandoffParams{AgentsPerStage: 4, Pipelines: 3_000, ArtifactSize: 4096},
		recoveryClients: 64,
		kills:           loadgen.KillSchedule{First: 6 * time.Second, Period: 6 * time.Second, Down: 2 * time.Second, Count: 2},
		scale: baton.ScaleParams{Tasks: 100_000, KVEntries: 10_000, Threads: 1_000, CheckpointsPerThread: 20,
			SmallTasks: 1_000, Workers: 16, SnapshotWait: time.Minute},
		scaleWarmup: time.Second, scaleDuration: 4 * time.Second,
		soak:       baton.SoakParams{Clients: 64, SampleEvery: 10 * time.Second},
		soakWarmup: 5 * time.Second, soakDuration: 3*time.Minute - 5*time.Second,
		sdkClients: []int{1, 64},
		lgThreads:  []int{1, 32}, lgSteps: 20,
		artifactSize: 128 << 20,
	}
}

// override applies the command line's overrides.
func (p *plan) override(o *options) error {
	if o.casClients != "" {
		p.casClients = nil
		for _, f := range strings.Split(o.casClients, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("--cas-clients: %q is not a positive number", f)
			}
			p.casClients = append(p.casClients, n)
		}
	}
	if o.rounds > 0 {
		p.rounds = o.rounds
	}
	if o.warmup > 0 {
		p.warmup = o.warmup
	}
	if o.duration > 0 {
		p.duration = o.duration
	}
	if o.soakDuration > 0 {
		if o.soakDuration <= p.soakWarmup {
			return fmt.Errorf("--soak-duration %v: want more than the soak's warm-up, %v", o.soakDuration, p.soakWarmup)
		}
		p.soakDuration = o.soakDuration - p.soakWarmup
	}
	return nil
}

// multiRound reports whether workload w runs in plan.rounds interleaved
// rounds: those whose figures compare systems (or SDKs) under load.
func multiRound(w string) bool {
	switch w {
	case result.WorkloadCAS, result.WorkloadQueue, result.WorkloadSDK, result.WorkloadLangGraph:
		return true
	}
	return false
}

// step is one phase of a suite run: one workload on one system with the
// members at one GOMAXPROCS setting (result.ProcsDefault or
// result.ProcsPinned), in round round of rounds.
type step struct {
	workload, system, procs string
	round, rounds           int
}

// name is the step's phase name in the report: "cas / baton",
// "cas / etcd (pinned, round 2 of 3)".
func (st step) name() string {
	var tags []string
	if st.procs == result.ProcsPinned {
		tags = append(tags, "pinned")
	}
	if st.rounds > 1 {
		tags = append(tags, fmt.Sprintf("round %d of %d", st.round, st.rounds))
	}
	name := st.workload + " / " + st.system
	if len(tags) > 0 {
		name += " (" + strings.Join(tags, ", ") + ")"
	}
	return name
}

// schedule is every step of a suite run, in order: the workloads in the
// order given, each on every selected system that has it with the members'
// GOMAXPROCS left to the Go runtime (the headline figures), and, with
// --pinned, on Baton and etcd again at GOMAXPROCS = cores / members for
// the --pinned-workloads (PostgreSQL is not a Go program: it runs once).
// cas, queue, sdk and langgraph run p.rounds times, interleaved: each round runs every
// (system, setting) pair once, starting one pair later than the round
// before, so that a slow minute of a shared machine falls on one round of
// one pair.
func schedule(o *options, p plan) []step {
	var steps []step
	for _, w := range o.workloads {
		type pair struct{ system, procs string }
		var pairs []pair
		for _, sys := range o.systems {
			if hasWorkload(sys, w) {
				pairs = append(pairs, pair{sys, result.ProcsDefault})
			}
		}
		if o.pinned && slices.Contains(o.pinnedWorkloads, w) {
			for _, sys := range o.systems {
				if hasWorkload(sys, w) && sys != result.SystemPostgres && sys != result.SystemSQLite {
					pairs = append(pairs, pair{sys, result.ProcsPinned})
				}
			}
		}
		rounds := 1
		if multiRound(w) {
			rounds = max(p.rounds, 1)
		}
		for round := 1; round <= rounds; round++ {
			for i := range pairs {
				pr := pairs[(i+round-1)%len(pairs)]
				steps = append(steps, step{workload: w, system: pr.system, procs: pr.procs, round: round, rounds: rounds})
			}
		}
	}
	return steps
}
