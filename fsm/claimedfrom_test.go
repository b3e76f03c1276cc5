package fsm

import (
	"testing"
)

// TestExpiredClaimStatusIsClaimable: a task a claim moved out of the
// claimed statuses (set_status "running", the docs' example) whose lease
// runs out is claimable again by a claim of the status it was claimed
// from; a claim without set_status takes it back in that status; a holder
// that changed the status or released the task takes it out of that.
func TestExpiredClaimStatusIsClaimable(t *testing.T) {
	running := "running"
	cases := []struct {
		name string
		// after runs between the first claim (lease 1000 ms) and the
		// second claim (5 s later, statuses ["pending"], setStatus).
		after      func(l *lc, held *Task)
		setStatus  *string
		wantClaim  bool
		wantStatus string
	}{
		{"expired, default claim", nil, nil, true, "pending"},
		{"expired, claim setting running", nil, &running, true, "running"},
		{"holder finished", func(l *lc, held *Task) {
			s := "done"
			l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: held.ID, FencingToken: &held.FencingToken, Status: &s}))
		}, nil, false, ""},
		{"holder released", func(l *lc, held *Task) {
			l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: held.ID, FencingToken: &held.FencingToken, Release: true}))
		}, nil, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLC(t)
			l.create(&TaskCreateArgs{ID: "t1"})
			first := l.ok(l.stamped(queueClaimCmd(1000, &running)))
			if first == nil || first.Status != "running" {
				t.Fatalf("first claim: got %+v, want t1 running", first)
			}
			if tc.after != nil {
				tc.after(l, first)
			}
			l.now += 5000
			r := l.do(l.stamped(queueClaimCmd(1000, tc.setStatus)))
			got, _ := r.Obj.(*Task)
			switch {
			case !r.OK():
				t.Fatalf("second claim: %s %s", r.Code, r.Message)
			case !tc.wantClaim && got != nil:
				t.Errorf("second claim: got %s in %q, want nothing claimable", got.ID, got.Status)
			case tc.wantClaim && got == nil:
				t.Errorf("second claim: got nothing, want t1 (its lease ran out at 1000)")
			case tc.wantClaim && (got.Status != tc.wantStatus || got.FencingToken <= first.FencingToken || got.Attempt != 2):
				t.Errorf("second claim: got status %q token %d attempt %d, want %q, a token above %d, attempt 2",
					got.Status, got.FencingToken, got.Attempt, tc.wantStatus, first.FencingToken)
			}
		})
	}
}

// TestClaimSetStatusEntryVersion: a claim that sets a status goes in an
// EntryVersion5 entry (a member from before ClaimedFrom refuses it); one
// from an older leader's entry is applied as before, remembering nothing.
func TestClaimSetStatusEntryVersion(t *testing.T) {
	running := "running"
	for _, tc := range []struct {
		cmd  *Command
		want byte
	}{
		{queueClaimCmd(1000, nil), EntryVersion},
		{queueClaimCmd(1000, &running), EntryVersion5},
		{NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: "t1", Owner: "w", LeaseMs: 1000, SetStatus: &running}), EntryVersion5},
		{NewCommand(KindTxn, 0, "acme", "", &TxnArgs{Ops: []TxnOp{{Kind: KindTaskClaim,
			Args: EncodeArgs(&TaskClaimArgs{ID: "t1", Owner: "w", LeaseMs: 1000, SetStatus: &running})}}}), EntryVersion5},
	} {
		if got := EncodeEntry([]*Command{tc.cmd})[0]; got != tc.want {
			t.Errorf("%s (set_status %v): entry version %d, want %d", tc.cmd.Kind, tc.cmd.ver, got, tc.want)
		}
	}

	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1"})
	c := l.stamped(queueClaimCmd(1000, &running))
	old, err := DecodeEntry(append([]byte{EntryVersion}, EncodeEntry([]*Command{c})[1:]...))
	if err != nil {
		t.Fatal(err)
	}
	if first := l.ok(old[0]); first.ClaimedFrom != "" {
		t.Errorf("claim in a version 1 entry: ClaimedFrom %q, want none", first.ClaimedFrom)
	}
	l.now += 5000
	if r := l.do(l.stamped(queueClaimCmd(1000, nil))); r.Obj != nil {
		t.Errorf("default claim after a version 1 claim: got %v, want nothing (as before EntryVersion5)", r.Obj)
	}
}

func queueClaimCmd(leaseMs int64, setStatus *string) *Command {
	return NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: leaseMs,
		Statuses: []string{"pending"}, SetStatus: setStatus})
}

// stamped is c as the leader stamps a queue claim.
func (l *lc) stamped(c *Command) *Command {
	l.f.Stamp(c)
	return c
}
