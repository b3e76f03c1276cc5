package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestOpStatsCountTasksAndOutcomes: the task counts follow creates, claims
// that change the status and refused commands (rolled back, not counted);
// a claim over an expired lease counts as an expiry.
func TestOpStatsCountTasksAndOutcomes(t *testing.T) {
	f := New()
	idx := uint64(0)
	apply := func(now int64, c *Command) *Result {
		idx++
		c.Now = now
		return applyOne(t, f, idx, c)
	}
	apply(1000, tenantPut(1000, "acme"))
	for i := range 3 {
		if r := apply(1000, NewCommand(KindTaskCreate, 1000, "acme", "", &TaskCreateArgs{ID: fmt.Sprintf("t%d", i), Queue: "q1", Status: "pending"})); !r.OK() {
			t.Fatalf("create: %s", describe(r))
		}
	}
	running := "running"
	claim := func(now int64, id, owner string) *Result {
		return apply(now, NewCommand(KindTaskClaim, now, "acme", "", &TaskClaimArgs{ID: id, Owner: owner, LeaseMs: 100, SetStatus: &running}))
	}
	if r := claim(1000, "t0", "w1"); !r.OK() {
		t.Fatalf("claim: %s", describe(r))
	}
	if r := claim(1050, "t0", "w2"); r.Code != CodeLeaseHeld {
		t.Fatalf("claim of a held lease: %s, want lease_held", describe(r))
	}
	if r := claim(2000, "t0", "w2"); !r.OK() { // w1's lease ended at 1100
		t.Fatalf("claim over an expired lease: %s", describe(r))
	}
	st := f.OpStats()
	want := map[TaskGroup]int64{{"acme", "q1", "pending"}: 2, {"acme", "q1", "running"}: 1}
	if !maps.Equal(st.Tasks, want) {
		t.Errorf("tasks: got %v, want %v", st.Tasks, want)
	}
	if st.LeaseExpiries != 1 {
		t.Errorf("lease expiries: got %d, want 1", st.LeaseExpiries)
	}
	if n := st.Outcomes[CommandOutcome{KindTaskClaim, ""}]; n != 2 {
		t.Errorf("successful claims: got %d, want 2", n)
	}
	if n := st.Outcomes[CommandOutcome{KindTaskClaim, CodeLeaseHeld}]; n != 1 {
		t.Errorf("lease_held claims: got %d, want 1", n)
	}
}

// TestOpStatsMatchRecount: after random task commands (some refused and
// rolled back), the counts kept command by command equal those a restore
// recounts from the state.
func TestOpStatsMatchRecount(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := New()
		idx := uint64(1)
		applyOne(t, f, idx, tenantPut(1, "acme"))
		statuses := []string{"pending", "running", "done"}
		for now := int64(2); now < 600; now++ {
			id := fmt.Sprintf("t%d", rng.IntN(40))
			st := statuses[rng.IntN(len(statuses))]
			var c *Command
			switch rng.IntN(4) {
			case 0:
				c = NewCommand(KindTaskCreate, now, "acme", "", &TaskCreateArgs{ID: id, Queue: fmt.Sprintf("q%d", rng.IntN(3)), Status: st})
			case 1:
				c = NewCommand(KindTaskClaim, now, "acme", "", &TaskClaimArgs{ID: id, Owner: fmt.Sprintf("w%d", rng.IntN(3)), LeaseMs: int64(rng.IntN(20) + 1), SetStatus: &st})
			case 2:
				c = NewCommand(KindTaskUpdate, now, "acme", "", &TaskUpdateArgs{ID: id, Status: &st})
			default:
				c = NewCommand(KindTaskDelete, now, "acme", "", &TaskDeleteArgs{ID: id})
			}
			idx++
			applyOne(t, f, idx, c)
		}
		g := New()
		restoreFrom(t, g, persist(t, f))
		got, want := f.OpStats().Tasks, g.OpStats().Tasks
		if !maps.Equal(got, want) {
			t.Errorf("seed %d: kept %v, recounted %v", seed, got, want)
		}
		if len(want) < 3 {
			t.Errorf("seed %d: only %d task groups; the commands exercise too little", seed, len(want))
		}
		refused := 0
		for o, n := range f.OpStats().Outcomes {
			if o.Code != "" {
				refused += int(n)
			}
		}
		if refused == 0 {
			t.Errorf("seed %d: no command was refused; the rollback path is not exercised", seed)
		}
	}
}
