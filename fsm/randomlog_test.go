package fsm

import (
	"fmt"
	"math/rand/v2"

	"github.com/hashicorp/raft"
)

// randomLog builds a reproducible log of every command kind of the command
// table (TestRandomLogCoversEveryKind holds it to that), successes and
// failures, fenced writes with current and stale tokens, transactions,
// idempotent retries, client sessions and a clock that sometimes goes back.
//
// It applies each entry it makes to an FSM of its own, to make later
// commands that can succeed: fences with a task's current token, refs to
// artifacts that exist. Others are made from guesses (a checkpoint's
// parent is the last one put in the thread) or at random, so that the
// refusals (fenced, version_mismatch, not_found, ...) are in the log too.
func randomLog(seed uint64, entries int) []*raft.Log {
	g := &logGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: 1_700_000_000_000,
		aux:   rand.New(rand.NewPCG(seed, 17)),
		cpx:   rand.New(rand.NewPCG(seed, 23)),
		v6:    rand.New(rand.NewPCG(seed, 29)),
		nx:    rand.New(rand.NewPCG(seed, 31)),
		cpb:   rand.New(rand.NewPCG(seed, 37)),
		dx:    rand.New(rand.NewPCG(seed, 41)),
		heads: map[string]string{}, state: New()}
	var logs []*raft.Log
	index := uint64(0)
	for range entries {
		index += 1 + uint64(g.rng.IntN(3)) // raft-internal entries leave gaps
		g.now += int64(g.rng.IntN(400)) - 50
		cmds := make([]*Command, 1+g.rng.IntN(4))
		for i := range cmds {
			if c := g.resend(); c != nil {
				cmds[i] = c
				continue
			}
			cmds[i] = g.command(index, i == 0)
			if cmds[i].Session != 0 {
				g.sent = append(g.sent[max(0, len(g.sent)-7):], cmds[i])
			}
		}
		logs = append(logs, logOf(index, cmds...))
		g.state.Apply(logs[len(logs)-1])
	}
	// Then rounds of derived commands, one of every kind in the table's
	// order (derivedlog_test.go), after the hand-made ones so that those
	// apply as they did, in tenants of their own.
	var cmds []*Command
	for range max(1, entries/30) {
		for _, s := range commandTable {
			cmds = append(cmds, derivedCommand(g.dx, g.state, g.now, fmt.Sprintf("d%d", g.dx.IntN(2)), s.Kind))
			if g.dx.IntN(2) == 0 {
				continue
			}
			index += 1 + uint64(g.dx.IntN(3))
			g.now += int64(g.dx.IntN(400))
			logs = append(logs, logOf(index, cmds...))
			g.state.Apply(logs[len(logs)-1])
			cmds = nil
		}
	}
	if len(cmds) > 0 {
		logs = append(logs, logOf(index+1, cmds...))
	}
	return logs
}

// logGen is randomLog's state: its randomness, the leader's clock, and what
// it remembers of the log so far to make commands that can succeed.
type logGen struct {
	rng *rand.Rand
	// aux draws the choices of kinds added later (retention), so that
	// they leave rng's sequence, and what the tests above exercise, as
	// it was.
	aux *rand.Rand
	// cpx draws the choices of this release's checkpoint kinds and fields
	// (run ids, blobs, copy, prune, run deletes, retention), so that those
	// of aux stay as they were.
	cpx *rand.Rand
	// v6 draws the choices of version 6's task kinds and fields
	// (cancellation, dependencies, waitpoints), likewise.
	v6 *rand.Rand
	// cpb draws version 6's checkpoint fields (writes of bytes), likewise.
	cpb *rand.Rand
	// nx draws the choices of task.update_claim (version 6), likewise.
	nx *rand.Rand
	// dx draws the derived commands (derivedlog_test.go), likewise.
	dx    *rand.Rand
	now   int64
	state *FSM // the log so far, applied

	opens     []genSession      // sessions opened (by an open first in its entry)
	claims    []genClaim        // tasks claimed
	heads     map[string]string // tenant/thread -> the last checkpoint put in it
	lastPut   [2]string         // tenant and thread of the last checkpoint put made
	lastWP    [2]string         // tenant and id of the last waitpoint create made
	lastSch   [2]string         // tenant and id of the last schedule create made
	artifacts []genArtifact     // artifacts published
	fresh     int               // names made so far that no other command uses
	sent      []*Command        // the last session writes, for resend
}

// resend is, now and then, a client's retry of a recent session write:
// the same command again, stamped with the leader's time of now, which the
// state machine must answer with the first answer (a replay) while the
// session remembers it. Drawn from aux, so that the kinds' choices in rng
// do not depend on it.
func (g *logGen) resend() *Command {
	if len(g.sent) == 0 || g.aux.IntN(10) != 0 {
		return nil
	}
	c := *g.sent[g.aux.IntN(len(g.sent))]
	c.Now = g.now
	return &c
}

type genSession struct {
	index             uint64
	tenant, principal string
}

type genClaim struct{ tenant, task string }

type genArtifact struct{ tenant, id string }

func (g *logGen) name(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, g.rng.IntN(n)) }

// thread is one of a few thread ids: names of the old grammar, and ids
// that are escaped in keys (an e-mail address, one with a slash that
// would read as another thread's keys unescaped).
// threadWithHead is the first tenant and thread (of thread's) that has a
// checkpoint in the default namespace, else the last put's.
func (g *logGen) threadWithHead() (tenant, thread string) {
	for i := range 4 {
		for _, th := range []string{"th0", "th1", "u@example.com", "th0/c/x"} {
			if tn := fmt.Sprintf("t%d", i); g.state.ThreadHead(tn, th, "") != "" {
				return tn, th
			}
		}
	}
	return g.lastPut[0], g.lastPut[1]
}

func (g *logGen) thread() string {
	return []string{"th0", "th1", "u@example.com", "th0/c/x"}[g.rng.IntN(4)]
}

// checkpointNS is the default namespace, mostly, or one of two others.
func (g *logGen) checkpointNS() string {
	return []string{"", "", "sub:1", "sub|a/b"}[g.rng.IntN(4)]
}

// genChunk is one of a few chunks; a digest has always the same size.
func (g *logGen) genChunk() ChunkRef {
	i := g.rng.IntN(3)
	return ChunkRef{Digest: fmt.Sprintf("sha256:%064x", i+1), Size: int64(10 * (i + 1))}
}

// fence is no fence, a remembered claim's token (current unless the task
// was claimed again since), or a token that never was one.
func (g *logGen) fence(c *Command) *Fence {
	switch n := g.rng.IntN(6); {
	case n < 4 || len(g.claims) == 0:
		return nil
	case n == 4:
		return &Fence{TaskID: g.name("task", 5), Token: uint64(g.rng.IntN(1 << 20))}
	default: // the current token of a task claimed lately, if it still exists
		cl := g.claims[len(g.claims)-1-g.rng.IntN(min(len(g.claims), 3))]
		c.Tenant = cl.tenant
		t, _, _ := g.state.GetTask(cl.tenant, cl.task)
		if t == nil {
			return &Fence{TaskID: cl.task, Token: 1}
		}
		return &Fence{TaskID: cl.task, Token: t.FencingToken}
	}
}

func (g *logGen) version() *uint64 {
	if g.rng.IntN(3) != 0 {
		return nil
	}
	v := uint64(g.rng.IntN(2)) // 0: must not exist; 1: never a version (they are index<<16|seq)
	return &v
}

// txnOps are operations for a transaction of tenant's, of the kinds the
// table allows: either one op on what exists (which may fail), or a few
// that succeed together (a new task created, updated and claimed; an entry
// written and deleted; a ref moved to an artifact of the tenant's).
func (g *logGen) txnOps(tenant string) []TxnOp {
	op := func(k Kind, args any) TxnOp { return TxnOp{Kind: k, Args: encode(args)} }
	switch g.rng.IntN(5) {
	case 0:
		g.fresh++
		id := fmt.Sprintf("txtask%d", g.fresh)
		return []TxnOp{op(KindTaskCreate, &TaskCreateArgs{ID: id, Queue: "q"}),
			op(KindTaskUpdate, &TaskUpdateArgs{ID: id, Payload: []byte(`{"n":2}`)}),
			op(KindTaskClaim, &TaskClaimArgs{ID: id, Owner: g.name("w", 3), LeaseMs: 1000})}
	case 1:
		k := g.name("k", 3)
		return []TxnOp{op(KindKVPut, &KVPutArgs{Namespace: "ns", Key: k, Value: []byte(`2`)}),
			op(KindKVDelete, &KVDeleteArgs{Namespace: "ns", Key: k})}
	case 2:
		for _, a := range g.artifacts {
			if _, _, ok := g.state.ArtifactByID(tenant, a.id); ok && a.tenant == tenant {
				return []TxnOp{op(KindRefSet, &RefSetArgs{Ref: g.name("r", 3), ArtifactID: a.id})}
			}
		}
	}
	switch g.rng.IntN(4) {
	case 0:
		return []TxnOp{op(KindTaskClaim, &TaskClaimArgs{ID: g.name("task", 5), Owner: g.name("w", 3), LeaseMs: 1000})}
	case 1:
		return []TxnOp{op(KindTaskUpdate, &TaskUpdateArgs{ID: g.name("task", 5), Result: []byte(`"txn"`)})}
	case 2:
		return []TxnOp{op(KindKVDelete, &KVDeleteArgs{Namespace: "ns", Key: g.name("k", 3)})}
	}
	return []TxnOp{op(KindKVPut, &KVPutArgs{Namespace: "ns", Key: g.name("k", 3), Value: []byte(`2`),
		Fence: g.fence(&Command{Tenant: tenant})})}
}

// command makes one command of a kind chosen at random; first says it is
// the first of its entry.
func (g *logGen) command(index uint64, first bool) *Command {
	rng, now := g.rng, g.now
	tenant := g.name("t", 4)
	var c *Command
	switch rng.IntN(44) {
	case 0, 1:
		c = tenantPut(now, tenant)
	case 2, 3:
		p := g.name("p", 6)
		c = principalCreate(now, tenant, p, g.name("h", 20), Grant{Resource: "kv", Prefix: p, Actions: []string{"read"}})
	case 4:
		// Half drop the principal's Idempotency-Key records (version 5).
		c = NewCommand(KindPrincipalDelete, now, tenant, "", &PrincipalDeleteArgs{Name: g.name("p", 6), DropKeys: rng.IntN(2) == 0})
	case 5:
		c = NewCommand(KindPrincipalRotate, now, tenant, "", &PrincipalRotateArgs{Name: g.name("p", 6),
			TokenHash: g.name("h", 20), TokenSalt: g.name("s", 20)})
	case 6:
		c = NewCommand(KindTenantQuota, now, tenant, "", &TenantQuotaArgs{TenantQuota{
			MaxKeys: int64(rng.IntN(4) * 40), MaxBytes: int64(rng.IntN(3) * 6000)}})
	case 7:
		c = NewCommand(KindMemberSet, now, "", "", &Member{ID: g.name("n", 3), HTTPAddr: g.name("h", 100)})
	case 8:
		c = NewCommand(KindMemberDelete, now, "", "", &MemberDeleteArgs{ID: g.name("n", 3)})
	case 9:
		// Small limits, so that sessions are evicted and expire.
		c = NewCommand(KindLimitsSet, now, "", "", &Limits{SessionTTL: int64(2000 + rng.IntN(20000)),
			SessionBytes: int64(1000 + rng.IntN(4000)), SessionsPerTenant: int64(1 + rng.IntN(3)),
			IdemBytes: int64(1500 + rng.IntN(5000)), IdemTenantBytes: int64(800 + rng.IntN(3000))})
	case 10, 11, 37, 38:
		c = NewCommand(KindSessionOpen, now, tenant, g.name("p", 2), &SessionOpenArgs{})
		if rng.IntN(2) == 0 {
			c.Principal = ""
		}
		if first {
			g.opens = append(g.opens, genSession{index, tenant, c.Principal})
		}
	case 12:
		c = &Command{Kind: kindTestPutThenFail, Now: now, Tenant: tenant}
		switch g.v6.IntN(3) { // or a waitpoint or a schedule (version 6)
		case 0:
			c = g.waitpointOp(now, tenant)
		case 1:
			c = g.scheduleOp(now, tenant)
		}

	case 13, 14:
		a := &TaskCreateArgs{ID: g.name("task", 5), Queue: "q", Priority: int64(rng.IntN(3)), Payload: []byte(`{"n":1}`)}
		if g.v6.IntN(3) == 0 { // on other tasks (version 6), which may not exist, with a policy
			a.DependsOn = []string{g.v6name("task", 5), g.v6name("task", 5)}[:1+g.v6.IntN(2)]
			a.DepPolicy = []string{"", DepPolicyFail, DepPolicyCancel, DepPolicyIgnore}[g.v6.IntN(4)]
		}
		if g.v6.IntN(3) == 0 { // a concurrency key (version 6)
			a.ConcurrencyKey = g.v6name("key", 2)
		}
		c = NewCommand(KindTaskCreate, now, tenant, "", a)
	case 15:
		id := g.name("task", 5)
		c = NewCommand(KindTaskClaim, now, tenant, "", &TaskClaimArgs{ID: id, Owner: g.name("w", 3),
			LeaseMs: int64(rng.IntN(3000))})
		g.claims = append(g.claims, genClaim{tenant, id})
	case 16:
		c = NewCommand(KindTaskQueueClaim, now, tenant, "", &QueueClaimArgs{Queue: "q", Owner: g.name("w", 3),
			LeaseMs: int64(rng.IntN(3000)), Statuses: []string{"pending"}})
		if g.aux.IntN(4) != 0 { // mostly as a leader of this build writes it; else as an older one did
			if g.nx.IntN(4) == 0 { // a batch claim (version 6), max 0 (refused) to 4
				c = NewCommand(KindTaskQueueClaim, now, tenant, "", &QueueClaimArgs{Queue: "q", Owner: fmt.Sprintf("w%d", g.nx.IntN(3)),
					LeaseMs: int64(g.nx.IntN(3000)), Statuses: []string{"pending"}, Max: int64(g.nx.IntN(6)) - 1})
			}
			g.state.Stamp(c)
		}
	case 17:
		c = &Command{Kind: KindTaskRenew, Now: now, Tenant: tenant}
		a := &TaskRenewArgs{ID: g.name("task", 5), LeaseMs: 2000}
		if len(g.claims) > 0 && rng.IntN(4) != 0 { // a task claimed lately, with its token
			cl := g.claims[len(g.claims)-1-rng.IntN(min(len(g.claims), 3))]
			c.Tenant, a.ID = cl.tenant, cl.task
			if t, _, ok := g.state.GetTask(cl.tenant, cl.task); ok {
				a.FencingToken = t.FencingToken
			}
		}
		c.Args = encode(a)
		switch g.v6.IntN(8) { // or (version 6) the holder cancels, or parks the task on a waitpoint of its tenant
		case 0:
			c = NewCommand(KindTaskCancel, now, c.Tenant, "", &TaskCancelArgs{ID: a.ID, FencingToken: &a.FencingToken})
		case 1, 2, 3: // the latest task claimed that still has an owner, in the last waitpoint's tenant
			for i := len(g.claims) - 1; i >= max(0, len(g.claims)-6); i-- {
				cl := g.claims[i]
				if t, _, ok := g.state.GetTask(cl.tenant, cl.task); ok && t.Owner != "" && g.lastWP[0] == cl.tenant {
					c = NewCommand(KindTaskWait, now, cl.tenant, "", &TaskWaitArgs{ID: cl.task, FencingToken: t.FencingToken, WaitpointID: g.lastWP[1]})
					break
				}
			}
		}
	case 18:
		c = &Command{Kind: KindTaskUpdate, Now: now, Tenant: tenant}
		done := "done"
		a := &TaskUpdateArgs{ID: g.name("task", 5), Status: &done, Result: []byte(`1`), Release: rng.IntN(2) == 0}
		if fc := g.fence(c); fc != nil {
			a.ID, a.FencingToken = fc.TaskID, &fc.Token
		}
		c.Args = encode(a)
		if g.nx.IntN(3) == 0 { // and the next claim of q in the same command (version 6)
			cl := QueueClaimArgs{Queue: "q", Owner: fmt.Sprintf("w%d", g.nx.IntN(3)), LeaseMs: int64(g.nx.IntN(3000)),
				Statuses: []string{"pending"}, Final: true}
			if g.nx.IntN(2) == 0 {
				cl.SetStatus = ptr("running")
			}
			c = NewCommand(KindTaskUpdateClaim, now, c.Tenant, "", &TaskUpdateClaimArgs{Update: *a, Claim: cl})
			switch g.nx.IntN(3) { // or with max, or a batch of updates and a claim (version 6)
			case 0:
				cl.Max = int64(1 + g.nx.IntN(3))
				c = NewCommand(KindTaskUpdateClaim, now, c.Tenant, "", &TaskUpdateClaimArgs{Update: *a, Claim: cl})
			case 1:
				b := &TaskUpdateBatchArgs{Updates: []TaskUpdateArgs{*a}}
				for range g.nx.IntN(3) { // more updates, of tasks claimed lately or any
					u := TaskUpdateArgs{ID: fmt.Sprintf("task%d", g.nx.IntN(5)), Status: &done, Release: true}
					if len(g.claims) > 0 {
						cl := g.claims[len(g.claims)-1-g.nx.IntN(min(len(g.claims), 4))]
						if t, _, ok := g.state.GetTask(cl.tenant, cl.task); ok && cl.tenant == c.Tenant {
							u.ID, u.FencingToken = t.ID, ptr(t.FencingToken-uint64(g.nx.IntN(2))) // current or stale
						}
					}
					b.Updates = append(b.Updates, u)
				}
				if g.nx.IntN(4) != 0 {
					cl.Max = int64(g.nx.IntN(4)) // 0: refused
					b.Claim = &cl
				}
				c = NewCommand(KindTaskUpdateBatch, now, c.Tenant, "", b)
			}
		}
	case 19:
		c = NewCommand(KindTaskDelete, now, tenant, "", &TaskDeleteArgs{ID: g.name("task", 5)})
		switch g.v6.IntN(10) { // or a cancellation (version 6): by a caller, by the holder, or the sweep
		case 0:
			c = NewCommand(KindTaskCancel, now, tenant, "", &TaskCancelArgs{ID: g.v6name("task", 5), Reason: "stop"})
		case 1:
			c = &Command{Kind: KindTaskCancel, Now: now, Tenant: tenant}
			a := &TaskCancelArgs{ID: g.v6name("task", 5)}
			if fc := g.v6fence(c); fc != nil {
				a.ID, a.FencingToken = fc.TaskID, &fc.Token
			}
			c = NewCommand(KindTaskCancel, now, c.Tenant, "", a)
		case 2:
			c = NewCommand(KindTaskCancelSweep, now, "", "", &TaskCancelSweepArgs{Max: 1 + g.v6.IntN(3)})
		case 3: // queued dependency resolutions (deps.go)
			c = NewCommand(KindTaskResolveDeps, now, "", "", &TaskResolveDepsArgs{Max: 1 + g.v6.IntN(3)})
		case 4, 5: // waitpoints (waitpoints.go): create, complete, time them out
			c = g.waitpointOp(now, tenant)
		case 6, 7:
			c = NewCommand(KindWaitpointExpire, now, "", "", &WaitpointExpireArgs{Max: 1 + g.v6.IntN(3)})
		}

	case 20, 21:
		c = &Command{Kind: KindKVPut, Now: now, Tenant: tenant}
		c.Args = encode(&KVPutArgs{Namespace: "ns", Key: g.name("k", 3), Value: []byte(`1`),
			TTLMs: int64(rng.IntN(2) * rng.IntN(3000)), ExpectVersion: g.version(), Fence: g.fence(c)})
	case 22:
		if g.aux.IntN(3) == 0 {
			c = g.storeCommand(now, tenant)
			break
		}
		c = &Command{Kind: KindKVDelete, Now: now, Tenant: tenant}
		a := &KVDeleteArgs{Namespace: "ns", Key: g.name("k", 3), ExpectVersion: g.version(), Fence: g.fence(c)}
		if e, _, ok := g.state.GetKV(c.Tenant, "ns", a.Key, now); ok && rng.IntN(2) == 0 {
			a.ExpectVersion = &e.Version // the live version
		}
		c.Args = encode(a)
	case 23:
		c = NewCommand(KindKVPurge, now, "", "", &KVPurgeArgs{Max: 1 + rng.IntN(3)})
		if g.aux.IntN(2) == 0 { // retained tasks whose period ran out
			c = NewCommand(KindTaskPurge, now, "", "", &TaskPurgeArgs{Max: 1 + g.aux.IntN(3)})
		} else if g.aux.IntN(2) == 0 { // LangGraph store items (version 6)
			c = g.storeCommand(now, tenant)
		}

	case 24, 25:
		// Threads of the old grammar and e-mail-like ones, in the default
		// namespace or another; data inline or in held chunks.
		c = &Command{Kind: KindCheckpointPut, Now: now}
		fc, th, ns := g.fence(c), g.thread(), g.checkpointNS()
		if c.Tenant == "" {
			c.Tenant = tenant
		}
		key := c.Tenant + "/" + th + "\x00" + ns
		a := &CheckpointPutArgs{Thread: th, NS: ns, ID: g.name("cp", 30), ParentID: g.heads[key],
			Data: []byte(`{"s":1}`), Fence: fc}
		if g.cpx.IntN(3) == 0 {
			a.RunID = g.name("run", 3)
		}
		if g.cpx.IntN(3) == 0 { // a channel value by version: new, or one stored before
			v := fmt.Sprintf("v%d", g.cpx.IntN(4))
			a.BlobRefs = []BlobRef{{Channel: "m", Version: v}}
			if g.cpx.IntN(2) == 0 {
				a.Blobs = []CheckpointBlob{{Channel: "m", Version: v, Type: "json", Data: []byte(`"` + v + `"`)}}
				if g.cpb.IntN(3) == 0 { // held in chunks (version 6)
					i := g.cpb.IntN(3) // as genChunk, from its own rng
					a.Blobs[0].Data, a.Blobs[0].Chunks = nil, []ChunkRef{{Digest: fmt.Sprintf("sha256:%064x", i+1), Size: int64(10 * (i + 1))}}
				}
			}
		}
		if rng.IntN(4) == 0 {
			a.Fork, a.ParentID = true, g.name("cp", 30)
		}
		if rng.IntN(3) == 0 {
			a.Data, a.Chunks = nil, []ChunkRef{g.genChunk()}
		}
		g.heads[key] = a.ID
		g.lastPut = [2]string{c.Tenant, th}
		c = NewCommand(KindCheckpointPut, now, c.Tenant, "", a)
	case 26:
		th, ns := g.thread(), g.checkpointNS()
		a := &CheckpointWritesArgs{Thread: th, NS: ns, ID: g.state.ThreadHead(tenant, th, ns), TaskID: g.name("task", 5)}
		if rng.IntN(2) == 0 { // a whole array, as before version 5
			a.Writes = []byte(fmt.Sprintf("[%d]", rng.IntN(2)))
		} else { // by index, special channels (< 0) included
			for i := range 1 + rng.IntN(3) {
				a.Entries = append(a.Entries, CheckpointWrite{Idx: int64(rng.IntN(4) - 2 + i), Channel: g.name("ch", 3),
					Value: []byte(fmt.Sprintf("%d", rng.IntN(3)))})
				if g.cpb.IntN(3) == 0 { // bytes of a serializer's type (version 6)
					e := &a.Entries[len(a.Entries)-1]
					e.Type, e.Value = "msgpack", []byte{0x92, byte(g.cpb.IntN(256))}
				}
			}
		}
		c = NewCommand(KindCheckpointWrites, now, tenant, "", a)
	case 27:
		c = &Command{Kind: KindThreadDelete, Now: now}
		a := &ThreadDeleteArgs{Thread: g.thread(), Fence: g.fence(c)}
		if c.Tenant == "" {
			c.Tenant = tenant
		}
		c = NewCommand(KindThreadDelete, now, c.Tenant, "", a)
		switch g.cpx.IntN(14) { // or another end of a thread's life, or retention
		case 0, 1: // a thread that had a put
			c = NewCommand(KindThreadDelete, now, g.lastPut[0], "", &ThreadDeleteArgs{Thread: g.lastPut[1]})
		case 2:
			tn, th := g.threadWithHead()
			c = NewCommand(KindThreadCopy, now, tn, "", &ThreadCopyArgs{Source: th, Target: g.name("copy", 40)})
		case 3:
			c = NewCommand(KindThreadPrune, now, c.Tenant, "", &ThreadPruneArgs{Threads: []string{g.thread(), g.thread()},
				KeepLatest: g.cpx.IntN(3) != 0, Fence: a.Fence})
		case 4:
			c = NewCommand(KindCheckpointDeleteRuns, now, c.Tenant, "", &CheckpointDeleteRunsArgs{RunIDs: []string{g.name("run", 3)}, Fence: a.Fence})
		case 5:
			c = NewCommand(KindCheckpointPolicy, now, c.Tenant, "", &CheckpointPolicyArgs{Prefix: g.thread()[:g.cpx.IntN(3)],
				KeepLast: uint64(g.cpx.IntN(3)), MaxAgeMs: int64(g.cpx.IntN(3) * 500)})
		case 6:
			c = NewCommand(KindCheckpointPurge, now, "", "", &CheckpointPurgeArgs{Max: 1 + g.cpx.IntN(3)})
		}

	case 28:
		c = &Command{Kind: KindOpBegin, Now: now, Tenant: tenant}
		c.Args = encode(&OpBeginArgs{ID: g.name("op", 4), Kind: "email", ParamsDigest: g.name("d", 2), Fence: g.fence(c)})
	case 29:
		states := []string{OpSucceeded, OpFailed, OpUnknown}
		c = NewCommand(KindOpFinish, now, tenant, "", &OpFinishArgs{ID: g.name("op", 4),
			State: states[rng.IntN(3)], Result: []byte(fmt.Sprintf("%d", rng.IntN(2)))})

	case 30, 31:
		ch := g.genChunk()
		c = NewCommand(KindChunkHeld, now, tenant, "", &ChunkHeldArgs{Digest: ch.Digest, Size: ch.Size})
	case 32, 33, 34:
		switch rng.IntN(10) {
		case 0:
			c = NewCommand(KindChunkGC, now, "", "", &ChunkGCArgs{Before: now - int64(rng.IntN(20_000)), Max: 1 + rng.IntN(3)})
		case 4: // delete a version (mostly one that exists) or a whole name
			c = g.artifactDelete(now, tenant)
		case 5:
			c = NewCommand(KindArtifactPolicy, now, tenant, "", &ArtifactPolicyArgs{Prefix: g.name("a", 2)[:1+rng.IntN(2)],
				KeepLast: uint64(rng.IntN(4))})
		default:
			c = &Command{Kind: KindArtifactPublish, Now: now, Tenant: tenant}
			a := &ArtifactPublishArgs{Name: g.name("a", 3), Digest: fmt.Sprintf("sha256:%064x", rng.IntN(1<<20)),
				MediaType: "text/plain", Fence: g.fence(c)}
			for range 1 + rng.IntN(2) {
				ch := g.genChunk()
				a.Chunks, a.Size = append(a.Chunks, ch), a.Size+ch.Size
			}
			c.Args = encode(a)
			m := &Manifest{Name: a.Name, Digest: a.Digest, Size: a.Size, Chunks: a.Chunks, MediaType: a.MediaType,
				Sources: []string{}, TaskID: a.TaskID}
			g.artifacts = append(g.artifacts, genArtifact{c.Tenant, artifactID(m)})
		}
	case 35, 36:
		var published []genArtifact
		for _, a := range g.artifacts {
			if _, _, ok := g.state.ArtifactByID(a.tenant, a.id); ok {
				published = append(published, a)
			}
		}
		if len(published) == 0 || rng.IntN(5) == 0 {
			c = NewCommand(KindRefDelete, now, tenant, "", &RefDeleteArgs{Ref: g.name("r", 3)})
			break
		}
		a := published[rng.IntN(len(published))]
		var expect *string
		if rng.IntN(3) == 0 {
			expect = ptr(g.artifacts[rng.IntN(len(g.artifacts))].id)
		}
		if rng.IntN(3) == 0 {
			c = NewCommand(KindRefDelete, now, a.tenant, "", &RefDeleteArgs{Ref: g.name("r", 3), ExpectArtifactID: expect})
			break
		}
		c = &Command{Kind: KindRefSet, Now: now}
		fc := g.fence(c) // its task may be of another tenant: fenced
		c.Tenant = a.tenant
		c.Args = encode(&RefSetArgs{Ref: g.name("r", 3), ArtifactID: a.id, ExpectArtifactID: expect, Fence: fc})

	case 40: // lifecycle: attempts, backoff and a delay on create
		a := &TaskCreateArgs{ID: g.name("task", 5), Queue: "q", Priority: int64(rng.IntN(3)),
			MaxAttempts: uint64(rng.IntN(4)), BackoffInitialMs: int64(rng.IntN(300)), BackoffMaxMs: int64(rng.IntN(2000))}
		if rng.IntN(2) == 0 {
			a.AvailableAt = now + int64(rng.IntN(600)-100)
		} else {
			a.DelayMs = int64(rng.IntN(500))
		}
		if g.aux.IntN(3) == 0 { // its own retention, and maybe terminal from the start
			a.RetentionMs, a.Status = int64(1+g.aux.IntN(2000)), []string{"", "done", "cancelled"}[g.aux.IntN(3)]
		}
		c = NewCommand(KindTaskCreate, now, tenant, "", a)
	case 41: // a failed attempt, mostly of a task claimed lately, with its token
		a := &TaskFailArgs{ID: g.name("task", 5), Error: g.name("e", 3), NonRetryable: rng.IntN(5) == 0, Rand: rng.Uint64()}
		if len(g.claims) > 0 && rng.IntN(4) != 0 {
			cl := g.claims[len(g.claims)-1-rng.IntN(min(len(g.claims), 3))]
			tenant, a.ID = cl.tenant, cl.task
			if t, _, ok := g.state.GetTask(cl.tenant, cl.task); ok {
				a.FencingToken = t.FencingToken
			}
		}
		c = NewCommand(KindTaskFail, now, tenant, "", a)
	case 42:
		if rng.IntN(2) == 0 {
			c = NewCommand(KindTaskRetry, now, tenant, "", &TaskRetryArgs{ID: g.name("task", 5), DelayMs: int64(rng.IntN(300))})
		} else {
			c = NewCommand(KindTaskUpdate, now, tenant, "", &TaskUpdateArgs{ID: g.name("task", 5), Release: true, DelayMs: int64(rng.IntN(300))})
		}
	case 43:
		c = NewCommand(KindQueuePolicy, now, tenant, "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{
			MaxAttempts: uint64(rng.IntN(3)), BackoffInitialMs: int64(rng.IntN(200)),
			RetentionMs: int64(g.aux.IntN(2) * g.aux.IntN(3000))}}) // terminal tasks of q deleted after it, or kept
		if g.v6.IntN(2) == 0 { // flow control (version 6): leased, per-key and rate limits
			var a QueuePolicyArgs
			_ = decode(c.Args, &a)
			a.Policy.MaxLeased, a.Policy.KeyLimit = int64(g.v6.IntN(4)), int64(g.v6.IntN(3))
			a.Policy.ClaimsPerSecond, a.Policy.ClaimBurst = int64(g.v6.IntN(2)*(1+g.v6.IntN(5))), int64(g.v6.IntN(3))
			c = NewCommand(KindQueuePolicy, now, tenant, "", &a)
		}

	default:
		var a TxnArgs
		for range 1 + rng.IntN(2) {
			a.Ops = append(a.Ops, g.txnOps(tenant)...)
		}
		c = NewCommand(KindTxn, now, tenant, "", &a)
	}
	tenant = c.Tenant
	g.retry(c)
	if taskKindsV6[c.Kind] && g.v6.IntN(2) == 0 {
		// Half of version 6's commands go plain, so that enough of these
		// rarer kinds apply (retry's keys and sessions refuse many).
		*c = Command{Kind: c.Kind, Now: c.Now, Tenant: tenant, Args: c.Args, ver: c.ver}
	}
	return c
}

// artifactDelete deletes a version of an artifact published lately (with
// or without a guard) or, at times, every version of a name.
func (g *logGen) artifactDelete(now int64, tenant string) *Command {
	rng := g.rng
	if len(g.artifacts) == 0 || rng.IntN(4) == 0 {
		a := &ArtifactDeleteArgs{Name: g.name("a", 3)}
		if rng.IntN(2) == 0 {
			a.ExpectVersion = ptr(uint64(rng.IntN(4)))
		}
		return NewCommand(KindArtifactDelete, now, tenant, "", a)
	}
	ga := g.artifacts[len(g.artifacts)-1-rng.IntN(min(len(g.artifacts), 4))]
	a := &ArtifactDeleteArgs{Name: g.name("a", 3), Version: 1 + uint64(rng.IntN(3))}
	for i := len(g.artifacts) - 1; i >= max(0, len(g.artifacts)-8); i-- {
		if m, _, ok := g.state.ArtifactByID(g.artifacts[i].tenant, g.artifacts[i].id); ok {
			ga, a.Name, a.Version = g.artifacts[i], m.Name, m.Version
			break
		}
	}
	if rng.IntN(3) == 0 {
		a.ExpectArtifactID = ptr(g.artifacts[rng.IntN(len(g.artifacts))].id)
	}
	return NewCommand(KindArtifactDelete, now, ga.tenant, "", a)
}

// ptr is a pointer to v, for the optional fields of args.
func ptr[T any](v T) *T { return &v }

// retry puts c, at random, under an Idempotency-Key or in a client session.
func (g *logGen) retry(c *Command) {
	rng, now := g.rng, g.now
	switch rng.IntN(6) {
	case 0:
		idem(c, g.name("p", 2), g.name("k", 5), g.name("fp", 2), int64(rng.IntN(2000)))
	case 1: // keys that carry their time
		idem(c, g.name("p", 2), uuid7(now-int64(rng.IntN(3000)), rng.IntN(3)), g.name("fp", 2), int64(rng.IntN(2000)))
	case 2, 3:
		if c.Kind == KindSessionOpen {
			return
		}
		g.session(c)
		c.Seq, c.IdemFP = uint64(1+rng.IntN(4)), []byte(g.name("fp", 1+rng.IntN(2)))
		c.Ack = uint64(rng.IntN(int(c.Seq) + 1))
	}
}

// session places c in a recently opened session, mostly as its owner, or
// in one that does not exist.
func (g *logGen) session(c *Command) {
	if len(g.opens) == 0 || g.rng.IntN(8) == 0 {
		c.Session = uint64(g.rng.IntN(1 << 20)) // unknown
		return
	}
	o := g.opens[len(g.opens)-1-g.rng.IntN(min(len(g.opens), 4))]
	c.Session = o.index<<16 | 1
	if g.rng.IntN(8) != 0 { // mostly its owner
		c.Principal = o.principal
		if o.principal != "" {
			c.Tenant = o.tenant
		}
	}
}

// storeCommand is a knowledge-store write, touch or purge (kvstore.go).
func (g *logGen) storeCommand(now int64, tenant string) *Command {
	ns := []string{g.name("a", 2), g.name("b", 2)}[:1+g.aux.IntN(2)]
	switch g.aux.IntN(3) {
	case 0:
		return NewCommand(KindStoreTouch, now, tenant, "", &StoreTouchArgs{Items: []StoreRef{{NS: ns, Key: g.name("k", 3)}}})
	case 1:
		return NewCommand(KindStorePurge, now, "", "", &StorePurgeArgs{Max: 1 + g.aux.IntN(3)})
	}
	op := StoreWriteOp{NS: ns, Key: g.name("k", 3), TTLMs: int64(g.aux.IntN(2) * g.aux.IntN(3000))}
	if g.aux.IntN(3) != 0 {
		op.Value, op.Vectors = []byte(`{"n":1}`), [][]float32{{1, float32(g.aux.IntN(3))}}
	}
	return NewCommand(KindStoreWrite, now, tenant, "", &StoreWriteArgs{Ops: []StoreWriteOp{op}})
}

// claimTenant is mostly the tenant of a task claimed lately, so that
// waitpoints are made where tasks can park on them; else tenant.
func (g *logGen) claimTenant(tenant string) string {
	if len(g.claims) == 0 || g.v6.IntN(4) == 0 {
		return tenant
	}
	return g.claims[len(g.claims)-1].tenant
}

// waitpointOp makes a waitpoint in the tenant of a task claimed lately (so
// that a holder can park on it) or completes the last one made.
func (g *logGen) waitpointOp(now int64, tenant string) *Command {
	if g.lastWP[0] != "" && g.v6.IntN(2) == 0 {
		wp := g.lastWP
		if g.v6.IntN(3) == 0 {
			wp[1] = g.v6name("wp", 3)
		}
		return NewCommand(KindWaitpointComplete, now, wp[0], "", &WaitpointCompleteArgs{ID: wp[1],
			Payload: []byte(fmt.Sprintf("%d", g.v6.IntN(2)))})
	}
	a := &WaitpointCreateArgs{ID: g.v6name("wp", 3), TimeoutMs: int64(1 + g.v6.IntN(3000))}
	if g.v6.IntN(2) == 0 {
		a.TimeoutMs *= 100 // most outlive the log, some time out
	}
	c := NewCommand(KindWaitpointCreate, now, g.claimTenant(tenant), "", a)
	g.lastWP = [2]string{c.Tenant, a.ID}
	return c
}

// taskKindsV6 are version 6's kinds of tasks and waitpoints.
var taskKindsV6 = map[Kind]bool{KindTaskCancel: true, KindTaskCancelSweep: true, KindTaskResolveDeps: true,
	KindWaitpointCreate: true, KindWaitpointComplete: true, KindWaitpointExpire: true, KindTaskWait: true,
	KindScheduleCreate: true, KindScheduleDelete: true, KindSchedulePause: true, KindScheduleTick: true}

// scheduleOp creates, ticks, pauses, resumes or deletes a schedule of the
// tenant; ticks are those the schedule's next tick says are due, as the
// leader would compute them for an interval.
func (g *logGen) scheduleOp(now int64, tenant string) *Command {
	id := g.v6name("sch", 2)
	if g.lastSch[0] != "" && g.v6.IntN(4) != 0 {
		tenant, id = g.lastSch[0], g.lastSch[1]
	}
	s, _, ok := g.state.GetSchedule(tenant, id)
	switch n := g.v6.IntN(8); {
	case !ok || n == 0:
		g.lastSch = [2]string{tenant, id}
		return NewCommand(KindScheduleCreate, now, tenant, "", &ScheduleCreateArgs{ID: id, Queue: "q", IntervalMs: int64(200 + g.v6.IntN(800)),
			Payload: []byte(`{"s":1}`), NextAt: now + int64(g.v6.IntN(500))})
	case n == 1 || n == 3:
		return NewCommand(KindScheduleDelete, now, tenant, "", &ScheduleDeleteArgs{ID: id})
	case n == 2:
		return NewCommand(KindSchedulePause, now, tenant, "", &SchedulePauseArgs{ID: id, Paused: !s.Paused, NextAt: now + 100})
	default:
		a := &ScheduleTickArgs{ID: id, Expect: s.NextAt, NextAt: s.NextAt + s.IntervalMs}
		for at := s.NextAt; at <= now && len(a.Ticks) < 3; at += s.IntervalMs {
			a.Ticks = append(a.Ticks, at)
			a.NextAt = at + s.IntervalMs
		}
		return NewCommand(KindScheduleTick, now, tenant, "", a)
	}
}

// v6name and v6fence are name and fence drawn from v6.
func (g *logGen) v6name(prefix string, n int) string {
	return fmt.Sprintf("%s%d", prefix, g.v6.IntN(n))
}

func (g *logGen) v6fence(c *Command) *Fence {
	if len(g.claims) == 0 || g.v6.IntN(3) == 0 {
		return nil
	}
	cl := g.claims[len(g.claims)-1-g.v6.IntN(min(len(g.claims), 3))]
	c.Tenant = cl.tenant
	t, _, _ := g.state.GetTask(cl.tenant, cl.task)
	if t == nil {
		return &Fence{TaskID: cl.task, Token: 1}
	}
	return &Fence{TaskID: cl.task, Token: t.FencingToken}
}
