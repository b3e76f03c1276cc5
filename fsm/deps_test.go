package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func (l *lc) createDeps(id string, deps []string, policy string) *Result {
	l.t.Helper()
	return l.do(NewCommand(KindTaskCreate, 0, "acme", "", &TaskCreateArgs{ID: id, Queue: "q", DependsOn: deps, DepPolicy: policy}))
}

func (l *lc) finish(id, status string, result string) {
	l.t.Helper()
	a := &TaskUpdateArgs{ID: id, Status: &status}
	if result != "" {
		a.Result = []byte(result)
	}
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", a))
}

// drainDeps applies task.resolve_deps until nothing is queued, as the
// leader does, and returns how many commands that took.
func (l *lc) drainDeps() int {
	l.t.Helper()
	n := 0
	for l.f.DepWorkPending() {
		l.ok(NewCommand(KindTaskResolveDeps, 0, "", "", &TaskResolveDepsArgs{Max: MaxResolveDeps}))
		if n++; n > 1000 {
			l.t.Fatal("task.resolve_deps does not drain its queue")
		}
	}
	return n
}

// claimAnswerJSON claims task id by id and returns the answer's JSON.
func (l *lc) claimByID(id string) (*Result, []byte) {
	l.t.Helper()
	r := l.do(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: id, Owner: "w", LeaseMs: 10_000}))
	return r, r.JSON()
}

// TestDepsBlockUntilDone: a task with dependencies is claimable neither
// from its queue nor by id until every dependency is done, and its claim
// then carries their results and artifacts.
func TestDepsBlockUntilDone(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a", Queue: "up"})
	l.create(&TaskCreateArgs{ID: "b", Queue: "up"})
	if r := l.createDeps("c", []string{"a", "b"}, ""); !r.OK() {
		t.Fatalf("create with depends_on: %s %s", r.Code, r.Message)
	}
	if b := l.do(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: "c", Owner: "w", LeaseMs: 1000})); b.Code != CodeVersionMismatch {
		t.Fatalf("claim by id of a blocked task: %s", b.Code)
	}
	if got := l.claimOrNil(1000); got != nil {
		t.Fatalf("a queue claim took %q, which waits on its dependencies", got.ID)
	}
	if s, _ := l.f.QueueStats("acme", "q"); s.Blocked != 1 || s.Waiting != 0 {
		t.Fatalf("stats of the blocked queue: blocked %d, waiting %d", s.Blocked, s.Waiting)
	}
	l.finish("a", "done", `{"pages":3}`)
	if got := l.claimOrNil(1000); got != nil {
		t.Fatal("claimable with one dependency of two done")
	}
	art := "sha256:" + strings.Repeat("ab", 32)
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "b", Status: new("done"), ArtifactID: &art}))
	if l.get("c").Deps.Left != 0 {
		t.Fatalf("after both are done: %+v", l.get("c").Deps)
	}
	r, body := l.claimByID("c")
	if !r.OK() {
		t.Fatalf("claim once both are done: %s %s", r.Code, r.Message)
	}
	var ans struct {
		Deps []DepOutput `json:"dependencies"`
		More bool        `json:"dependencies_truncated"`
		Left uint64      `json:"dependencies_left"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Deps) != 2 || ans.More || ans.Deps[0].TaskID != "a" || string(ans.Deps[0].Result) != `{"pages":3}` ||
		ans.Deps[1].ArtifactID != art || !ans.Deps[1].Resolved || ans.Deps[1].Status != "done" {
		t.Fatalf("claim answer: %s", body)
	}
	// A dependency done before the create counts at once.
	if r := l.createDeps("d", []string{"a"}, ""); !r.OK() || l.get("d").Deps.Left != 0 || l.get("d").blocked() {
		t.Fatalf("create on a done dependency: %s %+v", r.Code, l.get("d").Deps)
	}
}

// TestDepsFailurePolicies: a dependency that ends dead or cancelled (or
// is deleted) fails a dependent with policy fail (dead, cascading to its
// own dependents), cancels one with policy cancel, and counts as done for
// policy ignore.
func TestDepsFailurePolicies(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "e"})
	l.createDeps("fail", []string{"e"}, "")
	l.createDeps("cascade", []string{"fail"}, DepPolicyFail)
	l.createDeps("cancel", []string{"e"}, DepPolicyCancel)
	l.createDeps("ignore", []string{"e"}, DepPolicyIgnore)
	held := l.claim(10_000)
	if held.ID != "e" {
		t.Fatalf("claimed %q, want e (the others are blocked)", held.ID)
	}
	l.ok(NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: "e", FencingToken: held.FencingToken, NonRetryable: true}))
	l.drainDeps()
	for id, want := range map[string]string{"fail": StatusDead, "cascade": StatusDead, "cancel": StatusCancelled, "ignore": StatusPending} {
		got := l.get(id)
		if got.Status != want {
			t.Errorf("%s: status %q, want %q (life %+v)", id, got.Status, want, got.Life)
		}
	}
	if le := l.get("fail").Life.LastError; le != `dependency "e" ended dead` {
		t.Errorf("fail's last_error %q", le)
	}
	if le := l.get("cascade").Life.LastError; le != `dependency "fail" ended dead` {
		t.Errorf("cascade's last_error %q", le)
	}
	if got := l.claimOrNil(1000); got == nil || got.ID != "ignore" {
		t.Fatalf("claimable after the failure: %+v, want ignore", got)
	}
	// Created on a dependency that already failed: the policy applies at once.
	if r := l.createDeps("late", []string{"e"}, ""); !r.OK() || l.get("late").Status != StatusDead {
		t.Fatalf("create on a dead dependency: %s %+v", r.Code, l.get("late"))
	}
	// A deleted dependency fails its dependents too.
	l.create(&TaskCreateArgs{ID: "gone"})
	l.createDeps("orphan", []string{"gone"}, "")
	l.ok(NewCommand(KindTaskDelete, 0, "acme", "", &TaskDeleteArgs{ID: "gone"}))
	if got := l.get("orphan"); got.Status != StatusDead || got.Life.LastError != `dependency "gone" ended deleted` {
		t.Fatalf("dependent of a deleted task: %+v", got)
	}
	// A cancelled dependency (cancel.go) likewise.
	l.create(&TaskCreateArgs{ID: "stop"})
	l.createDeps("after-stop", []string{"stop"}, "")
	l.cancel(&TaskCancelArgs{ID: "stop"})
	if got := l.get("after-stop"); got.Status != StatusDead {
		t.Fatalf("dependent of a cancelled task: %+v", got)
	}
}

// TestDepsBadInput: a dependency on a missing task (another tenant's
// included: ids are per tenant), on itself, twice, or too many, and an
// unknown policy, are refused and write nothing.
func TestDepsBadInput(t *testing.T) {
	l := newLC(t)
	l.do(tenantPut(l.now, "other"))
	l.ok(NewCommand(KindTaskCreate, 0, "other", "", &TaskCreateArgs{ID: "theirs", Queue: "q"}))
	l.create(&TaskCreateArgs{ID: "a"})
	many := make([]string, MaxDependsOn+1)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	for name, c := range map[string]struct {
		deps   []string
		policy string
		msg    string
	}{
		"missing":      {[]string{"a", "nope"}, "", `depends_on names task "nope", which does not exist`},
		"other tenant": {[]string{"theirs"}, "", `depends_on names task "theirs", which does not exist`},
		"self":         {[]string{"a", "n"}, "", `task "n" may not depend on itself`},
		"twice":        {[]string{"a", "a"}, "", `depends_on names task "a" twice`},
		"too many":     {many, "", "at most 10000"},
		"policy":       {[]string{"a"}, "retry", `dependency_policy "retry" is not`},
	} {
		before := l.f.st.Len()
		r := l.createDeps("n", c.deps, c.policy)
		if r.Code != CodeInvalidArgument || !strings.Contains(r.Message, c.msg) {
			t.Errorf("%s: %s %q, want invalid_argument with %q", name, r.Code, r.Message, c.msg)
		}
		if _, _, ok := l.f.GetTask("acme", "n"); ok || l.f.st.Len() != before {
			t.Errorf("%s: the refused create wrote (task exists %v, keys %d → %d)", name, ok, before, l.f.st.Len())
		}
	}
	// A principal outside the dependency's queue grants sees it as missing.
	l.do(principalCreate(l.now, "acme", "bot", "h1", Grant{Resource: "tasks", Prefix: "mine", Actions: []string{"read", "write"}}))
	c := NewCommand(KindTaskCreate, 0, "acme", "bot", &TaskCreateArgs{ID: "n", Queue: "mine", DependsOn: []string{"a"}})
	if r := l.do(c); r.Code != CodeInvalidArgument {
		t.Fatalf("a dependency outside the caller's grants: %s %s", r.Code, r.Message)
	}
}

// TestDepsFanOut: 10,000 tasks on one; its completion resolves them in
// bounded commands (the completing one and task.resolve_deps), and every
// one is claimable afterwards.
func TestDepsFanOut(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "root", Queue: "up"})
	const n = 10000
	for i := range n {
		if r := l.createDeps(fmt.Sprintf("child-%05d", i), []string{"root"}, ""); !r.OK() {
			t.Fatal(r.Message)
		}
	}
	l.finish("root", "done", `1`)
	s, _ := l.f.QueueStats("acme", "q")
	if s.Blocked != n-depInlineBudget || s.Waiting != depInlineBudget {
		t.Fatalf("after the update: blocked %d, waiting %d; want the inline budget %d resolved", s.Blocked, s.Waiting, depInlineBudget)
	}
	cmds := l.drainDeps()
	s, _ = l.f.QueueStats("acme", "q")
	if s.Blocked != 0 || s.Waiting != n || cmds != (n-depInlineBudget+MaxResolveDeps-1)/MaxResolveDeps {
		t.Fatalf("after %d resolve commands: blocked %d, waiting %d", cmds, s.Blocked, s.Waiting)
	}
	if hasPrefix(l.f.st, "t/acme/tdr/") || hasPrefix(l.f.st, depQueuePrefix) {
		t.Fatal("edges or queue entries left after the drain")
	}
}

// TestDepsFanIn: one task on 10,000; claimable after the last is done; the
// claim carries the first MaxClaimDeps outputs and says more exist, and
// TaskDependencies pages through all of them. Deleting it cleans its keys
// up.
func TestDepsFanIn(t *testing.T) {
	l := newLC(t)
	const n = 10000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("p-%05d", i)
		l.create(&TaskCreateArgs{ID: ids[i], Queue: "up"})
	}
	if r := l.createDeps("join", ids, ""); !r.OK() {
		t.Fatal(r.Message)
	}
	for i, id := range ids {
		l.finish(id, "done", fmt.Sprintf(`{"i":%d}`, i))
		if i == n-2 {
			if _, _, ok := l.f.GetTask("acme", "join"); !ok || !l.get("join").blocked() {
				t.Fatal("join is not blocked with one dependency left")
			}
		}
	}
	r, body := l.claimByID("join")
	if !r.OK() {
		t.Fatalf("claim of the join: %s %s", r.Code, r.Message)
	}
	var ans struct {
		Deps []DepOutput `json:"dependencies"`
		More bool        `json:"dependencies_truncated"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || len(ans.Deps) != MaxClaimDeps || !ans.More || string(ans.Deps[1].Result) != `{"i":1}` {
		t.Fatalf("claim answer: %d outputs, truncated %v, err %v", len(ans.Deps), ans.More, err)
	}
	seen, after := 0, ""
	for {
		page, next, ok, _ := l.f.TaskDependencies("acme", "join", after, 1000)
		if !ok {
			t.Fatal("join not found")
		}
		for _, d := range page {
			if d.TaskID != ids[seen] || string(d.Result) != fmt.Sprintf(`{"i":%d}`, seen) {
				t.Fatalf("output %d: %+v", seen, d)
			}
			seen++
		}
		if next == "" {
			break
		}
		after = next
	}
	if seen != n {
		t.Fatalf("listed %d dependencies, want %d", seen, n)
	}
	l.ok(NewCommand(KindTaskDelete, 0, "acme", "", &TaskDeleteArgs{ID: "join"}))
	l.drainDeps()
	if hasPrefix(l.f.st, "t/acme/tdf/") || hasPrefix(l.f.st, depGCPrefix) {
		t.Fatal("a deleted dependent's keys are left")
	}
}

// TestDepsVersioning: a create with dependencies is written in an
// EntryVersion6 entry, and a state holding one is snapshotFormat5.
func TestDepsVersioning(t *testing.T) {
	c := NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "x", Queue: "q", DependsOn: []string{"a"}})
	if e := EncodeEntry([]*Command{c}); e[0] != EntryVersion6 {
		t.Fatalf("written as version %d", e[0])
	}
	if e := EncodeEntry([]*Command{NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "x", Queue: "q"})}); e[0] != EntryVersion {
		t.Fatalf("a create without dependencies written as version %d", e[0])
	}
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	l.createDeps("b", []string{"a"}, "")
	if f := snapshotFormatOf(l.f.st); f != snapshotFormat5 {
		t.Fatalf("format %d", f)
	}
}

// resultTask is the task of an answer: a claim of a task with
// dependencies answers it with their outputs.
func resultTask(obj any) *Task {
	switch x := obj.(type) {
	case *Task:
		return x
	case *claimedTask:
		return x.Task
	}
	return nil
}

// BenchmarkDepsCreateFanIn10k: the create of one task on 10,000 others,
// one command (go test -bench DepsCreateFanIn -run ^$ ./fsm/).
func BenchmarkDepsCreateFanIn10k(b *testing.B) {
	t := &testing.T{}
	l := newLC(t)
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("task-%020x", i)
		l.create(&TaskCreateArgs{ID: ids[i], Queue: "up"})
	}
	b.ResetTimer()
	for i := range b.N {
		l.createDeps(fmt.Sprintf("join-%d", i), ids, "")
	}
}

// BenchmarkDepsResolveBatch: one task.resolve_deps of MaxResolveDeps
// dependents of one task that is done.
func BenchmarkDepsResolveBatch(b *testing.B) {
	t := &testing.T{}
	l := newLC(t)
	for i := range b.N {
		b.StopTimer()
		root := fmt.Sprintf("root-%d", i)
		l.create(&TaskCreateArgs{ID: root, Queue: "up"})
		for j := range MaxResolveDeps + depInlineBudget {
			l.createDeps(fmt.Sprintf("kid-%d-%d", i, j), []string{root}, "")
		}
		l.finish(root, "done", "")
		b.StartTimer()
		l.ok(NewCommand(KindTaskResolveDeps, 0, "", "", &TaskResolveDepsArgs{Max: MaxResolveDeps}))
	}
}

// TestDepsStatsOfFailedDependent: a dependent that failed (dead) or was
// cancelled while dependencies were still unresolved is not counted as
// blocked: it waits on nothing.
func TestDepsStatsOfFailedDependent(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a", Queue: "up"})
	l.create(&TaskCreateArgs{ID: "b", Queue: "up"})
	l.createDeps("c", []string{"a", "b"}, "")
	l.createDeps("d", []string{"a", "b"}, "")
	l.finish("a", StatusDead, "")
	l.cancel(&TaskCancelArgs{ID: "d"})
	if got := l.get("c"); got.Status != StatusDead || got.Deps.Left != 1 {
		t.Fatalf("c: %+v %+v", got, got.Deps)
	}
	if s, _ := l.f.QueueStats("acme", "q"); s.Blocked != 0 {
		t.Fatalf("blocked %d, want 0: c is dead and d cancelled", s.Blocked)
	}
}
