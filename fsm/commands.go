package fsm

import "reflect"

// The command table: every replicated command kind, the struct its
// Command.Args decode to, the handler that applies it, and whether it may
// be an op of a transaction (KindTxn). Apply dispatches through it and
// nothing else; read it top to bottom to know everything a log entry can
// ask of the state machine. Adding a kind starts here; docs/design.md
// ("Adding a command") lists the other places to touch.
//
// The kinds' names are part of the replicated format: a log entry names
// its commands' kinds by these strings, so a kind is never renamed or
// reused for other arguments.
var commandTable = []commandSpec{
	// Cluster (members.go, limits.go). Proposed by the nodes themselves.
	{Kind: KindMemberSet, Args: Member{}, Apply: applyMemberSet},
	{Kind: KindMemberDelete, Args: MemberDeleteArgs{}, Apply: applyMemberDelete},
	{Kind: KindLimitsSet, Args: Limits{}, Apply: applyLimitsSet},

	// Tenants, principals and quotas (tenants.go, usage.go).
	{Kind: KindTenantPut, Args: TenantPutArgs{}, Apply: applyTenantPut},
	{Kind: KindPrincipalCreate, Args: PrincipalCreateArgs{}, Apply: applyPrincipalCreate},
	{Kind: KindPrincipalDelete, Args: PrincipalDeleteArgs{}, Apply: applyPrincipalDelete},
	{Kind: KindPrincipalRotate, Args: PrincipalRotateArgs{}, Apply: applyPrincipalRotate},
	{Kind: KindTenantQuota, Args: TenantQuotaArgs{}, Apply: applyTenantQuota},

	// Client sessions (sessions.go).
	{Kind: KindSessionOpen, Args: SessionOpenArgs{}, Apply: applySessionOpen},

	// Tasks (tasks.go).
	{Kind: KindTaskCreate, Args: TaskCreateArgs{}, Apply: applyTaskCreate, Txn: true},
	{Kind: KindTaskClaim, Args: TaskClaimArgs{}, Apply: applyTaskClaim, Txn: true},
	{Kind: KindTaskQueueClaim, Args: QueueClaimArgs{}, Apply: applyQueueClaim, Stamp: stampQueueClaim},
	{Kind: KindTaskRenew, Args: TaskRenewArgs{}, Apply: applyTaskRenew},
	{Kind: KindTaskUpdate, Args: TaskUpdateArgs{}, Apply: applyTaskUpdate, Txn: true},
	{Kind: KindTaskDelete, Args: TaskDeleteArgs{}, Apply: applyTaskDelete},
	// An update and the next queue claim in one command (claimnext.go).
	{Kind: KindTaskUpdateClaim, Args: TaskUpdateClaimArgs{}, Apply: applyTaskUpdateClaim, Since: EntryVersion6},
	{Kind: KindTaskUpdateBatch, Args: TaskUpdateBatchArgs{}, Apply: applyTaskUpdateBatch, Since: EntryVersion6}, // claimbatch.go

	// Task lifecycle (lifecycle.go): a failed attempt, and retrying a task.
	// Only in EntryVersion3 entries.
	{Kind: KindTaskFail, Args: TaskFailArgs{}, Apply: applyTaskFail, Since: EntryVersion3},
	{Kind: KindTaskRetry, Args: TaskRetryArgs{}, Apply: applyTaskRetry, Since: EntryVersion3},
	// A queue's lifecycle defaults for the tasks created in it later.
	{Kind: KindQueuePolicy, Args: QueuePolicyArgs{}, Apply: applyQueuePolicy, Since: EntryVersion3},
	// Retention (retention.go): the leader proposes task.purge.
	{Kind: KindTaskPurge, Args: TaskPurgeArgs{}, Apply: applyTaskPurge, Since: EntryVersion4},
	// Cancellation (cancel.go): the leader proposes task.cancel_sweep.
	{Kind: KindTaskCancel, Args: TaskCancelArgs{}, Apply: applyTaskCancel, Since: EntryVersion6},
	{Kind: KindTaskCancelSweep, Args: TaskCancelSweepArgs{}, Apply: applyTaskCancelSweep, Since: EntryVersion6},
	// Dependencies (deps.go): the leader proposes task.resolve_deps.
	{Kind: KindTaskResolveDeps, Args: TaskResolveDepsArgs{}, Apply: applyTaskResolveDeps, Since: EntryVersion6},
	// Waitpoints (waitpoints.go): the leader proposes waitpoint.expire.
	{Kind: KindWaitpointCreate, Args: WaitpointCreateArgs{}, Apply: applyWaitpointCreate, Since: EntryVersion6},
	{Kind: KindWaitpointComplete, Args: WaitpointCompleteArgs{}, Apply: applyWaitpointComplete, Since: EntryVersion6},
	{Kind: KindWaitpointExpire, Args: WaitpointExpireArgs{}, Apply: applyWaitpointExpire, Since: EntryVersion6},
	{Kind: KindTaskWait, Args: TaskWaitArgs{}, Apply: applyTaskWait, Since: EntryVersion6},
	// Schedules (schedules.go): the leader proposes schedule.tick.
	{Kind: KindScheduleCreate, Args: ScheduleCreateArgs{}, Apply: applyScheduleCreate, Since: EntryVersion6},
	{Kind: KindScheduleDelete, Args: ScheduleDeleteArgs{}, Apply: applyScheduleDelete, Since: EntryVersion6},
	{Kind: KindSchedulePause, Args: SchedulePauseArgs{}, Apply: applySchedulePause, Since: EntryVersion6},
	{Kind: KindScheduleTick, Args: ScheduleTickArgs{}, Apply: applyScheduleTick, Since: EntryVersion6},

	// Knowledge store (kv.go). The leader proposes kv.purge.
	{Kind: KindKVPut, Args: KVPutArgs{}, Apply: applyKVPut, Txn: true},
	{Kind: KindKVDelete, Args: KVDeleteArgs{}, Apply: applyKVDelete, Txn: true},
	{Kind: KindKVPurge, Args: KVPurgeArgs{}, Apply: applyKVPurge},
	// LangGraph's store (kvstore.go). The leader proposes store.purge.
	{Kind: KindStoreWrite, Args: StoreWriteArgs{}, Apply: applyStoreWrite, Since: EntryVersion6},
	{Kind: KindStoreTouch, Args: StoreTouchArgs{}, Apply: applyStoreTouch, Since: EntryVersion6},
	{Kind: KindStorePurge, Args: StorePurgeArgs{}, Apply: applyStorePurge, Since: EntryVersion6},

	// Checkpoints (checkpoints.go).
	{Kind: KindCheckpointPut, Args: CheckpointPutArgs{}, Apply: applyCheckpointPut},
	{Kind: KindCheckpointWrites, Args: CheckpointWritesArgs{}, Apply: applyCheckpointWrites},
	{Kind: KindThreadDelete, Args: ThreadDeleteArgs{}, Apply: applyThreadDelete},
	// Thread lifecycle (threads.go): copy, prune, delete the checkpoints of runs.
	{Kind: KindThreadCopy, Args: ThreadCopyArgs{}, Apply: applyThreadCopy, Since: EntryVersion5},
	{Kind: KindThreadPrune, Args: ThreadPruneArgs{}, Apply: applyThreadPrune, Since: EntryVersion5},
	{Kind: KindCheckpointDeleteRuns, Args: CheckpointDeleteRunsArgs{}, Apply: applyCheckpointDeleteRuns, Since: EntryVersion5},
	// Checkpoint retention (cpretention.go). The leader proposes checkpoint.purge.
	{Kind: KindCheckpointPolicy, Args: CheckpointPolicyArgs{}, Apply: applyCheckpointPolicy, Since: EntryVersion5},
	{Kind: KindCheckpointPurge, Args: CheckpointPurgeArgs{}, Apply: applyCheckpointPurge, Since: EntryVersion5},

	// Operation ledger (ops.go).
	{Kind: KindOpBegin, Args: OpBeginArgs{}, Apply: applyOpBegin},
	{Kind: KindOpFinish, Args: OpFinishArgs{}, Apply: applyOpFinish},

	// Chunks and artifacts (artifacts.go). The leader proposes chunk.gc.
	{Kind: KindChunkHeld, Args: ChunkHeldArgs{}, Apply: applyChunkHeld},
	{Kind: KindChunkGC, Args: ChunkGCArgs{}, Apply: applyChunkGC},
	{Kind: KindArtifactPublish, Args: ArtifactPublishArgs{}, Apply: applyArtifactPublish},
	// Deleting versions and keep-last policies (artifactlife.go).
	{Kind: KindArtifactDelete, Args: ArtifactDeleteArgs{}, Apply: applyArtifactDelete, Since: EntryVersion4},
	{Kind: KindArtifactPolicy, Args: ArtifactPolicyArgs{}, Apply: applyArtifactPolicy, Since: EntryVersion4},

	// Refs (refs.go).
	{Kind: KindRefSet, Args: RefSetArgs{}, Apply: applyRefSet, Txn: true},
	{Kind: KindRefDelete, Args: RefDeleteArgs{}, Apply: applyRefDelete},

	// Transactions (txn.go): ops of the kinds marked Txn above, all or nothing.
	{Kind: KindTxn, Args: TxnArgs{}, Apply: applyTxn},
}

// commandSpec is one row of the command table.
type commandSpec struct {
	Kind Kind
	// Args is the zero value of the struct Command.Args decode to.
	Args any
	// Apply applies the command to f.st (see handler).
	Apply handler
	// Txn: the kind may be an op of a KindTxn transaction (docs/api.md
	// "Transactions").
	Txn bool
	// Since is the first entry version that may hold the kind (0: every
	// one). A kind added after a release gets the newest EntryVersion
	// (fsm/codec.go), so that a member which predates it refuses the entry
	// instead of misapplying it; fields added to an older kind's args are
	// gated the same way by the args' entryVersion method (entryVersioner).
	Since byte
	// Stamp, if set, raises the entry version of a command about to be
	// proposed when what it needs depends on the state, not only on its
	// args (FSM.Stamp; the args' own fields are entryVersioner's).
	Stamp func(f *FSM, c *Command)
}

// handler applies one kind of command to f.st. It returns a failed result
// to have applyCommand roll back every write it made.
type handler func(f *FSM, ctx *applyCtx, c *Command) *Result

// handlers and txnKinds index the table by kind. They are filled in init,
// not in their declarations, because applyTxn dispatches through handlers:
// a declaration would make an initialization cycle.
var (
	handlers  = map[Kind]handler{}
	txnKinds  = map[Kind]bool{}
	kindSince = map[Kind]byte{}
	stampers  = map[Kind]func(*FSM, *Command){}
	// argTypes: the pointer type of each kind's args.
	argTypes = map[Kind]reflect.Type{}
)

var entryVersionerType = reflect.TypeFor[entryVersioner]()

func init() {
	for _, s := range commandTable {
		if _, dup := handlers[s.Kind]; dup {
			panic("fsm: kind listed twice in the command table: " + string(s.Kind))
		}
		handlers[s.Kind] = s.Apply
		if s.Txn {
			txnKinds[s.Kind] = true
		}
		if s.Since > EntryVersionLatest {
			panic("fsm: kind " + string(s.Kind) + " needs an entry version this build cannot write")
		}
		kindSince[s.Kind] = s.Since
		if s.Stamp != nil {
			stampers[s.Kind] = s.Stamp
		}
		argTypes[s.Kind] = reflect.PointerTo(reflect.TypeOf(s.Args))
	}
}

// Stamp sets the entry version of a command the leader is about to
// propose where its kind's table row says that version depends on the
// state (commandSpec.Stamp); for other kinds it does nothing. The proposer
// calls it for every command, just before each proposal, so that no caller
// chooses a version.
func (f *FSM) Stamp(c *Command) {
	if s := stampers[c.Kind]; s != nil {
		s(f, c)
	}
}

// Kinds lists every kind of the command table, in its order.
func Kinds() []Kind {
	out := make([]Kind, len(commandTable))
	for i, s := range commandTable {
		out[i] = s.Kind
	}
	return out
}

// TxnAllows reports whether kind may appear in a transaction.
func TxnAllows(k Kind) bool { return txnKinds[k] }
