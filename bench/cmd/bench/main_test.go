package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--quick", "--workloads", "cas, queue", "--systems", "baton"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.quick || strings.Join(o.workloads, ",") != "cas,queue" || strings.Join(o.systems, ",") != "baton" {
		t.Fatalf("got %+v, want quick, cas+queue, baton", o)
	}
	if o.rounds != 0 {
		t.Fatalf("rounds %d without --rounds, want 0 (the plan's)", o.rounds)
	}
	p := quickPlan()
	if err := p.override(&options{rounds: 3}); err != nil || p.rounds != 3 {
		t.Fatalf("--rounds 3: plan has %d rounds (%v), want 3", p.rounds, err)
	}
	if o, err := parseFlags(nil); err != nil || !slices.Contains(o.workloads, "soak") {
		t.Fatalf("default workloads %v (%v), want soak among them", o.workloads, err)
	}
	p = fullPlan()
	if got := p.soakWarmup + p.soakDuration; got != 30*time.Minute {
		t.Fatalf("full soak: %v in all, want 30m", got)
	}
	p = quickPlan()
	if got := p.soakWarmup + p.soakDuration; got != 3*time.Minute {
		t.Fatalf("quick soak: %v in all, want 3m", got)
	}
	if err := p.override(&options{soakDuration: 10 * time.Minute, duration: time.Second}); err != nil ||
		p.soakWarmup+p.soakDuration != 10*time.Minute {
		t.Fatalf("--soak-duration 10m: soak of %v (%v), want 10m in all, whatever --duration says", p.soakWarmup+p.soakDuration, err)
	}
	if err := p.override(&options{soakDuration: time.Second}); err == nil {
		t.Fatal("--soak-duration shorter than the warm-up: got no error")
	}
	if o, err := parseFlags([]string{"--pprof", "/tmp/p", "--pprof-role", "follower"}); err != nil || o.pprofRole != "follower" {
		t.Fatalf("--pprof-role follower: %q (%v)", o.pprofRole, err)
	}
	if o, err := parseFlags(nil); err != nil || o.pprofRole != "leader" {
		t.Fatalf("default --pprof-role %q (%v), want leader", o.pprofRole, err)
	}
	for _, bad := range [][]string{{"--workloads", "nope"}, {"--systems", "redis"}, {"--rounds", "-1"}, {"--pprof-role", "candidate"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%v): got no error, want one", bad)
		}
	}
}

// TestPeersModuleBuilds builds and vets bench/peers, the peers' module, so
// that a change to the shared bench/result or bench/loadgen cannot break
// it unnoticed. It needs the module proxy (or a filled module cache) and
// skips when neither answers.
func TestPeersModuleBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds another module")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := buildPeerbench(ctx, t.TempDir())
	if err != nil {
		if offline(err.Error()) {
			t.Skipf("bench/peers' dependencies cannot be fetched here: %v", err)
		}
		t.Fatal(err)
	}
	root, err := cluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	vet := exec.CommandContext(ctx, "go", "vet", "./...")
	vet.Dir = filepath.Join(root, "bench", "peers")
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("go vet in bench/peers: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput(); !strings.Contains(string(out), "-system") {
		t.Fatalf("peerbench --help: got %v\n%s", err, out)
	}
}

// offline reports whether a go command's error says modules could not be
// downloaded.
func offline(msg string) bool {
	for _, s := range []string{"dial tcp", "no such host", "GOPROXY=off", "connection refused", "i/o timeout", "TLS handshake"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// stepNames is the schedule as phase names.
func stepNames(steps []step) []string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = st.name()
		if st.procs != result.ProcsPinned && st.procs != result.ProcsDefault {
			out[i] += " with procs " + st.procs
		}
	}
	return out
}

// TestSchedule: every workload runs at default GOMAXPROCS on every system
// that has it; cas and queue also run pinned on Baton and etcd (not
// PostgreSQL), interleaved with the default runs; --pinned=false and
// --pinned-workloads change only the pinned runs.
func TestSchedule(t *testing.T) {
	o, err := parseFlags([]string{"--workloads", "cas,queue,handoff,recovery,scale,soak"})
	if err != nil {
		t.Fatal(err)
	}
	p := fullPlan()
	p.rounds = 2
	got := stepNames(schedule(o, p))
	want := []string{
		"cas / baton (round 1 of 2)", "cas / etcd (round 1 of 2)", "cas / baton (pinned, round 1 of 2)", "cas / etcd (pinned, round 1 of 2)",
		"cas / etcd (round 2 of 2)", "cas / baton (pinned, round 2 of 2)", "cas / etcd (pinned, round 2 of 2)", "cas / baton (round 2 of 2)",
		"queue / baton (round 1 of 2)", "queue / etcd (round 1 of 2)", "queue / postgres (round 1 of 2)",
		"queue / baton (pinned, round 1 of 2)", "queue / etcd (pinned, round 1 of 2)",
		"queue / etcd (round 2 of 2)", "queue / postgres (round 2 of 2)",
		"queue / baton (pinned, round 2 of 2)", "queue / etcd (pinned, round 2 of 2)", "queue / baton (round 2 of 2)",
		"handoff / baton",
		"recovery / baton", "recovery / etcd",
		"scale / baton",
		"soak / baton", "soak / etcd",
	}
	if !slices.Equal(got, want) {
		t.Errorf("full schedule:\n got %q\nwant %q", got, want)
	}

	o, _ = parseFlags([]string{"--quick", "--pinned=false"})
	for _, st := range schedule(o, quickPlan()) {
		if st.procs != result.ProcsDefault || st.rounds != 1 {
			t.Errorf("--quick --pinned=false: step %q at %s, round %d of %d; want every step at default, once", st.name(), st.procs, st.round, st.rounds)
		}
	}

	o, _ = parseFlags([]string{"--quick", "--workloads", "cas,recovery,handoff", "--systems", "baton,etcd", "--pinned-workloads", "recovery,handoff"})
	got = stepNames(schedule(o, quickPlan()))
	want = []string{"cas / baton", "cas / etcd",
		"recovery / baton", "recovery / etcd", "recovery / baton (pinned)", "recovery / etcd (pinned)",
		"handoff / baton", "handoff / baton (pinned)"}
	if !slices.Equal(got, want) {
		t.Errorf("--pinned-workloads recovery,handoff:\n got %q\nwant %q", got, want)
	}

	if o, err := parseFlags(nil); err != nil || !o.pinned || !slices.Equal(o.pinnedWorkloads, []string{"cas", "queue"}) {
		t.Errorf("defaults: pinned %v for %q (%v), want on for cas,queue", o.pinned, o.pinnedWorkloads, err)
	}
	if _, err := parseFlags([]string{"--pinned-workloads", "nope"}); err == nil {
		t.Error("--pinned-workloads nope: got no error")
	}
}
