package fsm

import (
	"testing"
)

// unstartedRelease is the release of held with Unstarted, as a worker
// sends it for a task it claimed and never started.
func unstartedRelease(held *Task) *Command {
	return NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: held.ID, FencingToken: u64(held.FencingToken),
		Release: true, Unstarted: true})
}

// claimOneOfBatch claims with Max 1 (set_status running, lease 1000 ms)
// and returns the task claimed.
func (l *lc) claimOneOfBatch() *Task {
	l.t.Helper()
	r := l.claimMax(1)
	b, _ := r.Obj.(*ClaimBatch)
	if !r.OK() || b == nil || len(b.Tasks) != 1 {
		l.t.Fatalf("batch claim: %s %s %+v", r.Code, r.Message, r.Obj)
	}
	return resultTask(b.Tasks[0])
}

// TestUnstartedReleaseGivesBackTheClaim: a task claimed on its last
// attempt (max_attempts 1) and released unstarted by its holder has the
// attempt it had before the claim, and the status it had before a claim
// that set "running": the next claim runs it. A plain release on the last
// attempt makes it dead at the next claim (without set_status), or
// leaves it "running", out of a claim of "pending" (with it), as before.
func TestUnstartedReleaseGivesBackTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		setStatus, unstarted bool
	}{
		{"unstarted, set_status", true, true},
		{"unstarted", false, true},
		{"plain release, set_status", true, false},
		{"plain release", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLC(t)
			l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 1})
			a := &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000, Statuses: []string{"pending"}, Max: 1}
			want := "pending"
			if tc.setStatus {
				a.SetStatus, want = new("running"), "running"
			}
			r := l.do(l.stamped(NewCommand(KindTaskQueueClaim, 0, "acme", "", a)))
			b, _ := r.Obj.(*ClaimBatch)
			if !r.OK() || b == nil || len(b.Tasks) != 1 {
				t.Fatalf("batch claim: %s %s %+v", r.Code, r.Message, r.Obj)
			}
			held := resultTask(b.Tasks[0])
			if held.Attempt != 1 || held.Status != want {
				t.Fatalf("claim: attempt %d status %q, want 1 and %q", held.Attempt, held.Status, want)
			}
			c := unstartedRelease(held)
			if !tc.unstarted {
				c = NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: held.ID, FencingToken: u64(held.FencingToken), Release: true})
			}
			got := l.ok(c)
			if tc.unstarted && (got.Attempt != 0 || got.Status != "pending" || got.Owner != "" || got.LeaseUntil != 0 || got.ClaimedFrom != "") {
				t.Fatalf("unstarted release: attempt %d status %q owner %q lease %d claimed from %q, want 0, pending, none",
					got.Attempt, got.Status, got.Owner, got.LeaseUntil, got.ClaimedFrom)
			}
			again := l.claim(1000)
			switch {
			case tc.unstarted && (again == nil || again.Attempt != 1 || again.FencingToken <= held.FencingToken):
				t.Errorf("claim after an unstarted release: got %+v, want t1 on attempt 1 with a new token", again)
			case !tc.unstarted && again != nil:
				t.Errorf("claim after a plain release on the last attempt: got %+v, want nothing", again)
			case !tc.unstarted && !tc.setStatus && l.get("t1").Status != StatusDead:
				t.Errorf("plain release on the last attempt: t1 %q after a claim, want dead", l.get("t1").Status)
			}
		})
	}
}

// TestUnstartedReleaseOnlyByTheLiveHolder: an unstarted release needs the
// current token of a live lease, release, and nothing else changed; a
// refused one writes nothing.
func TestUnstartedReleaseOnlyByTheLiveHolder(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1"})
	first := l.claimOneOfBatch()
	refuse := func(what string, c *Command, code string) {
		t.Helper()
		before := l.get("t1")
		if r := l.do(c); r.OK() || r.Code != code {
			t.Errorf("%s: got %s %s, want %s", what, r.Code, r.Message, code)
		}
		if after := l.get("t1"); after.Version != before.Version || after.Attempt != before.Attempt {
			t.Errorf("%s: the refused update wrote: version %d→%d attempt %d→%d", what, before.Version, after.Version, before.Attempt, after.Attempt)
		}
	}
	refuse("without release", NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "t1",
		FencingToken: u64(first.FencingToken), Unstarted: true}), CodeInvalidArgument)
	refuse("without token", NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "t1",
		Release: true, Unstarted: true}), CodeLeaseHeld)
	refuse("with a status", NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "t1",
		FencingToken: u64(first.FencingToken), Release: true, Unstarted: true, Status: new("done")}), CodeInvalidArgument)

	l.now += 5000 // the lease ran out: another claim may take and start it
	refuse("expired lease", unstartedRelease(first), CodeFenced)
	second := l.claimOneOfBatch()
	if second.Attempt != 2 {
		t.Fatalf("second claim: attempt %d, want 2", second.Attempt)
	}
	refuse("stale token", unstartedRelease(first), CodeFenced)
	if got := l.ok(unstartedRelease(second)); got.Attempt != 1 || got.Status != "pending" {
		t.Errorf("unstarted release of the second claim: attempt %d status %q, want 1 (the first claim's stays) and pending", got.Attempt, got.Status)
	}
}

// TestUnstartedReleaseInABatch: the batch's per-update Unstarted frees
// the slot the batch's claim then takes, and gives back the attempt.
func TestUnstartedReleaseInABatch(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 1})
	held := l.claimOneOfBatch()
	r := l.batch(1, TaskUpdateArgs{ID: held.ID, FencingToken: u64(held.FencingToken), Release: true, Unstarted: true})
	a, _ := r.Obj.(*UpdateBatchAnswer)
	if !r.OK() || a == nil || a.Results[0].Error != nil || len(a.Next) != 1 {
		t.Fatalf("batch: %s %s %+v", r.Code, r.Message, r.Obj)
	}
	if got := resultTask(a.Next[0]); got.ID != "t1" || got.Attempt != 1 || got.Status != "running" {
		t.Errorf("batch's claim: got %s attempt %d status %q, want t1 on attempt 1, running", got.ID, got.Attempt, got.Status)
	}
}

// TestUnstartedEntryVersion: an update with Unstarted goes in an
// EntryVersion6 entry, alone or in a transaction; one without it keeps
// the entry version it had.
func TestUnstartedEntryVersion(t *testing.T) {
	held := &Task{ID: "t1", FencingToken: 7}
	for _, tc := range []struct {
		cmd  *Command
		want byte
	}{
		{unstartedRelease(held), EntryVersion6},
		{NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "t1", FencingToken: u64(7), Release: true}), EntryVersion},
		{NewCommand(KindTxn, 0, "acme", "", &TxnArgs{Ops: []TxnOp{{Kind: KindTaskUpdate,
			Args: EncodeArgs(&TaskUpdateArgs{ID: "t1", FencingToken: u64(7), Release: true, Unstarted: true})}}}), EntryVersion6},
	} {
		if got := EncodeEntry([]*Command{tc.cmd})[0]; got != tc.want {
			t.Errorf("%s: entry version %d, want %d", tc.cmd.Kind, got, tc.want)
		}
	}
}
