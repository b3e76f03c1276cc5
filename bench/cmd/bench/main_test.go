package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/chaos/cluster"
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
	for _, bad := range [][]string{{"--workloads", "nope"}, {"--systems", "redis"}, {"--rounds", "-1"}} {
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
