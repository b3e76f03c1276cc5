package checker

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/baton-dev/baton/chaos/history"
)

// never is the return time given to operations whose outcome is unknown:
// later than every other operation, as porcupine's documentation does for
// operations that time out.
const never = int64(1) << 62

// LinResult is the linearizability verdict, one entry per partition.
type LinResult struct {
	Partitions   []Partition
	Anomalies    []Anomaly
	Inconclusive []string
	faults       []history.Fault
}

// Partition is one object checked on its own.
type Partition struct {
	Key    string // "kv:reg/k1", "task:t0", "ref:...", "cp:..."
	Ops    []porcupine.Operation
	IDs    []int // history op ids, parallel to Ops
	Result porcupine.CheckResult
	model  porcupine.Model
}

// builder builds the per-object porcupine histories of a history.
type builder struct {
	parts map[string]*Partition
	model map[string]porcupine.Model
	// KV version <-> value maps, per key.
	valueOf map[string]map[uint64]string
	// Tokens observed per task, and those issued by known claims.
	seen, issued map[string]map[uint64]bool
	// sweep: the tasks with max_attempts, whose owner may go with no
	// operation on them (see taskInput.sweep); purge: the tasks with a
	// retention period (taskInput.purge).
	sweep, purge map[string]bool
	// createdAt: when the first acknowledged create of each task returned;
	// a not_found answer to an op invoked after it means the task is gone.
	createdAt map[string]int64
	anomalies []Anomaly
}

// The nondeterministic models, as porcupine checks them.
var (
	regPorcupine  = registerModel.ToModel()
	taskPorcupine = taskModel.ToModel()
)

func newBuilder() *builder {
	return &builder{parts: map[string]*Partition{}, model: map[string]porcupine.Model{},
		valueOf: map[string]map[uint64]string{}, seen: map[string]map[uint64]bool{}, issued: map[string]map[uint64]bool{},
		sweep: map[string]bool{}, purge: map[string]bool{}, createdAt: map[string]int64{}}
}

func (b *builder) add(key string, m porcupine.Model, op *history.Op, in, out any) {
	p := b.parts[key]
	if p == nil {
		p = &Partition{Key: key, model: m}
		b.parts[key] = p
	}
	ret := op.Return
	if op.Outcome == history.Unknown {
		ret = never
	}
	p.Ops = append(p.Ops, porcupine.Operation{ClientId: op.Client, Input: in, Output: out, Call: op.Invoke, Return: ret,
		Metadata: fmt.Sprintf("op #%d %s", op.ID, op.Outcome)})
	p.IDs = append(p.IDs, op.ID)
}

func note(m map[string]map[uint64]bool, key string, tok uint64) {
	if tok == 0 {
		return
	}
	if m[key] == nil {
		m[key] = map[uint64]bool{}
	}
	m[key][tok] = true
}

// scanKV maps versions to values for every key, and reports a version
// that names two values or a value seen at two versions.
func (b *builder) scanKV(ops []history.Op) {
	versionOf := map[string]map[string]uint64{}
	firstOp := map[string]int{}
	record := func(op *history.Op, value string, version uint64) {
		key := op.In.Key
		if version == 0 || value == "" {
			return
		}
		if b.valueOf[key] == nil {
			b.valueOf[key], versionOf[key] = map[uint64]string{}, map[string]uint64{}
		}
		if v, ok := b.valueOf[key][version]; ok && v != value {
			b.anomalies = append(b.anomalies, Anomaly{Checker: NameLinearizable, Key: "kv:" + key,
				Message: fmt.Sprintf("version %d holds two values, %q and %q", version, v, value), Ops: []int{firstOp[key+"/"+v], op.ID}})
		}
		if v, ok := versionOf[key][value]; ok && v != version {
			b.anomalies = append(b.anomalies, Anomaly{Checker: NameLinearizable, Key: "kv:" + key,
				Message: fmt.Sprintf("value %q seen at versions %d and %d", value, v, version), Ops: []int{firstOp[key+"/"+value], op.ID}})
		}
		b.valueOf[key][version] = value
		versionOf[key][value] = version
		if _, ok := firstOp[key+"/"+value]; !ok {
			firstOp[key+"/"+value] = op.ID
		}
	}
	for i := range ops {
		op := &ops[i]
		if op.Outcome != history.OK {
			continue
		}
		switch op.Kind {
		case history.KVPut:
			record(op, op.In.Value, op.Out.Version)
		case history.KVGet:
			if op.Out.Exists {
				record(op, op.Out.Value, op.Out.Version)
			}
		}
	}
}

// scanTokens collects the tokens seen per task.
func (b *builder) scanTokens(ops []history.Op) {
	for i := range ops {
		op := &ops[i]
		if op.Kind == history.TaskCreate && op.In.MaxAttempts > 0 {
			b.sweep[op.In.Key] = true
		}
		if op.Kind == history.TaskCreate && op.In.RetentionMS > 0 {
			b.purge[op.In.Key] = true
		}
		if op.Kind == history.TaskCreate && op.Outcome == history.OK {
			if at, ok := b.createdAt[op.In.Key]; !ok || op.Return < at {
				b.createdAt[op.In.Key] = op.Return
			}
		}
		if op.Out.CurrentToken != nil {
			switch {
			case op.In.FenceTask != "":
				note(b.seen, op.In.FenceTask, *op.Out.CurrentToken)
			case isTaskKind(op.Kind):
				note(b.seen, op.In.Key, *op.Out.CurrentToken)
			}
		}
		if op.Outcome != history.OK || !isTaskKind(op.Kind) {
			continue
		}
		task := op.In.Key
		if op.Kind == history.TaskQueueClaim {
			task = op.Out.TaskID
		}
		if op.Out.MaxAttempts > 0 {
			b.sweep[task] = true
		}
		if op.Out.RetentionMS > 0 || op.Out.ExpiresAtMS > 0 {
			b.purge[task] = true
		}
		note(b.seen, task, op.Out.Token)
		if op.Kind == history.TaskClaim || op.Kind == history.TaskQueueClaim {
			note(b.issued, task, op.Out.Token)
		}
	}
}

func isTaskKind(k history.Kind) bool {
	switch k {
	case history.TaskGet, history.TaskClaim, history.TaskQueueClaim, history.TaskRenew, history.TaskUpdate,
		history.TaskFail, history.TaskRetry:
		return true
	}
	return false
}

func (b *builder) candidates(task string) []uint64 {
	var c []uint64
	for t := range b.seen[task] {
		if !b.issued[task][t] {
			c = append(c, t)
		}
	}
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c
}

// kvValue resolves a version to the value it holds: 0 is absent.
func (b *builder) kvValue(key string, version uint64) (string, bool) {
	if version == 0 {
		return "", true
	}
	v, ok := b.valueOf[key][version]
	return v, ok
}

func regResult(op *history.Op) regRes {
	switch op.Outcome {
	case history.OK:
		return resOK
	case history.Unknown:
		return resUnknown
	}
	switch op.Code {
	case "version_mismatch":
		return resMismatch
	case "not_found":
		return resNotFound
	}
	return resNoEffect
}

func (b *builder) addKV(op *history.Op) {
	key := op.In.Key
	in := regInput{}
	out := regOutput{res: regResult(op)}
	switch op.Kind {
	case history.KVGet:
		if op.Outcome == history.Unknown {
			return
		}
		in.op = regRead
		if op.Outcome == history.OK {
			out.value = op.Out.Value
		} else if out.res != resNotFound {
			return
		}
	case history.KVPut, history.KVDelete:
		in.op, in.value = regWrite, op.In.Value
		if op.Kind == history.KVDelete {
			in.op = regDelete
		}
		if op.In.ExpectVersion != nil {
			in.hasCond = true
			in.expect, in.expectKnown = b.kvValue(key, *op.In.ExpectVersion)
		}
		if op.Out.CurrentVersion != nil {
			out.current, out.currentKnown = b.kvValue(key, *op.Out.CurrentVersion)
		}
		if op.Kind == history.KVPut && out.res == resNotFound {
			out.res = resNoEffect
		}
	}
	b.add("kv:"+key, regPorcupine, op, in, out)
}

func (b *builder) addRef(op *history.Op) {
	out := regOutput{res: regResult(op)}
	in := regInput{}
	switch op.Kind {
	case history.RefGet:
		if op.Outcome == history.Unknown || (op.Outcome == history.Fail && out.res != resNotFound) {
			return
		}
		in.op, out.value = regRead, op.Out.Value
	case history.RefSet:
		in = regInput{op: regWrite, value: op.In.Value, okIfSame: true}
		if op.In.Expect != nil {
			in.hasCond, in.expect, in.expectKnown = true, *op.In.Expect, true
		}
		if op.Out.Current != nil {
			out.current, out.currentKnown = *op.Out.Current, true
		}
		if out.res == resNotFound { // the artifact, not the ref
			out.res = resNoEffect
		}
	}
	b.add("ref:"+op.In.Key, regPorcupine, op, in, out)
}

func (b *builder) addCheckpoint(op *history.Op) {
	out := regOutput{res: regResult(op)}
	in := regInput{}
	switch op.Kind {
	case history.CheckpointHead:
		if op.Outcome == history.Unknown || (op.Outcome == history.Fail && out.res != resNotFound) {
			return
		}
		in.op, out.value = regRead, op.Out.Value
	case history.CheckpointPut:
		in = regInput{op: regWrite, value: op.In.Value, hasCond: true, expectKnown: true}
		if op.In.Expect != nil {
			in.expect = *op.In.Expect
		}
		if op.Out.Current != nil {
			out.current, out.currentKnown = *op.Out.Current, true
		}
		if out.res == resNotFound {
			out.res = resNoEffect
		}
	}
	b.add("cp:"+op.In.Key, regPorcupine, op, in, out)
}

func taskResult(op *history.Op) taskRes {
	switch op.Outcome {
	case history.OK:
		return taskOK
	case history.Unknown:
		return taskUnknown
	}
	switch op.Code {
	case "fenced":
		return taskFenced
	case "lease_held":
		return taskLeaseHeld
	case "not_found":
		return taskNotFound
	}
	return taskNoEffect
}

func taskOut(op *history.Op) taskOutput {
	out := taskOutput{res: taskResult(op)}
	if op.Outcome == history.OK && isTaskKind(op.Kind) {
		out.hasTask, out.token, out.owner, out.result, out.status = true, op.Out.Token, op.Out.Owner, op.Out.Value, op.Out.Status
	}
	if op.Out.CurrentToken != nil {
		out.currentKnown, out.current = true, *op.Out.CurrentToken
	}
	out.leaseOwner = op.Out.LeaseOwner
	return out
}

func (b *builder) addTask(op *history.Op, tasks []string) {
	in := taskInput{owner: op.In.Owner, result: op.In.Value, release: op.In.Release, status: op.In.Status,
		nonRetryable: op.In.NonRetryable}
	if op.In.Token != nil {
		in.token, in.hasToken = *op.In.Token, true
	}
	out := taskOut(op)
	key := op.In.Key
	if out.res == taskNotFound && op.Kind != history.TaskQueueClaim {
		if at, ok := b.createdAt[key]; !ok || op.Invoke < at {
			out.res = taskNoEffect // perhaps before the task existed: it says nothing
		}
	}
	switch op.Kind {
	case history.TaskGet:
		if op.Outcome != history.OK && out.res != taskNotFound {
			return
		}
		in.op = taskRead
	case history.TaskClaim:
		in.op = taskClaim
	case history.TaskQueueClaim:
		in.op, in.queue = taskClaim, true
		switch {
		case op.Outcome == history.OK && op.Out.TaskID == "":
			return // nothing was claimable
		case op.Outcome == history.OK:
			key = op.Out.TaskID
		case op.Outcome == history.Unknown:
			// It may have claimed any task: give it to each.
			for _, t := range tasks {
				in.candidates, in.sweep, in.purge = b.candidates(t), b.sweep[t], b.purge[t]
				b.add("task:"+t, taskPorcupine, op, in, out)
			}
			return
		default:
			return
		}
	case history.TaskRenew:
		in.op = taskRenew
	case history.TaskUpdate:
		in.op = taskUpdate
	case history.TaskFail:
		in.op = taskFail
	case history.TaskRetry:
		in.op = taskRetry
	}
	if in.op == taskClaim && op.Outcome == history.Unknown {
		in.candidates = b.candidates(key)
	}
	in.sweep, in.purge = b.sweep[key], b.purge[key]
	b.add("task:"+key, taskPorcupine, op, in, out)
}

// addFence adds a guarded write on another resource to its task.
func (b *builder) addFence(op *history.Op) {
	if op.In.FenceTask == "" || op.Code == history.Aborted {
		return
	}
	out := taskOutput{res: taskResult(op)}
	if op.Outcome == history.Fail && op.Code != "fenced" {
		out.res = taskNoEffect
	}
	if op.Out.CurrentToken != nil {
		out.currentKnown, out.current = true, *op.Out.CurrentToken
	}
	in := taskInput{op: taskFence, token: op.In.FenceToken, hasToken: true, sweep: b.sweep[op.In.FenceTask], purge: b.purge[op.In.FenceTask]}
	b.add("task:"+op.In.FenceTask, taskPorcupine, op, in, out)
}

// Linearizable checks every register and task of h with porcupine. Each
// partition gets at most timeout.
func Linearizable(h *history.History, timeout time.Duration) *LinResult {
	ops := withoutCoord(Logical(h.Flat()))
	b := newBuilder()
	b.scanKV(ops)
	b.scanTokens(ops)
	var tasks []string
	taskSet := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		if isTaskKind(op.Kind) && op.Kind != history.TaskQueueClaim && op.Kind != history.TaskCreate && !taskSet[op.In.Key] {
			taskSet[op.In.Key] = true
			tasks = append(tasks, op.In.Key)
		}
	}
	sort.Strings(tasks)
	for i := range ops {
		op := &ops[i]
		if op.Code == history.Aborted {
			continue
		}
		switch op.Kind {
		case history.KVGet, history.KVPut, history.KVDelete:
			if !strings.HasPrefix(op.In.Key, SetNamespace+"/") { // inserted once each: LostWrites checks them
				b.addKV(op)
			}
		case history.RefGet, history.RefSet:
			b.addRef(op)
		case history.CheckpointHead, history.CheckpointPut:
			b.addCheckpoint(op)
		case history.TaskGet, history.TaskClaim, history.TaskQueueClaim, history.TaskRenew, history.TaskUpdate,
			history.TaskFail, history.TaskRetry:
			b.addTask(op, tasks)
		}
		switch op.Kind {
		case history.KVPut, history.KVDelete, history.RefSet, history.CheckpointPut, history.ArtifactPublish:
			b.addFence(op)
		}
	}
	res := &LinResult{Anomalies: b.anomalies, faults: h.Faults}
	keys := make([]string, 0, len(b.parts))
	for k := range b.parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Partitions = append(res.Partitions, *b.parts[k])
	}
	res.check(timeout)
	return res
}

// check runs porcupine on every partition, two at a time.
func (r *LinResult) check(timeout time.Duration) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range r.Partitions {
		p := &r.Partitions[i]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p.Result = porcupine.CheckOperationsTimeout(p.model, p.Ops, timeout)
		})
	}
	wg.Wait()
	for _, p := range r.Partitions {
		switch p.Result {
		case porcupine.Illegal:
			r.Anomalies = append(r.Anomalies, Anomaly{Checker: NameLinearizable, Key: p.Key,
				Message: fmt.Sprintf("no linearization of %d operations (see %s)", len(p.Ops), p.HTMLName()), Ops: p.IDs})
		case porcupine.Unknown:
			r.Inconclusive = append(r.Inconclusive, fmt.Sprintf("%s: porcupine timed out after %v on %d operations", p.Key, timeout, len(p.Ops)))
		}
	}
}

// HTMLName is the file name of the partition's visualisation.
func (p *Partition) HTMLName() string {
	r := strings.NewReplacer("/", "_", ":", "_")
	return "porcupine-" + r.Replace(p.Key) + ".html"
}

// WriteHTML writes porcupine's visualisation of every partition that is
// not linearizable (all partitions when all is true) into dir, with the
// faults as annotations, and returns the files written.
func (r *LinResult) WriteHTML(dir string, all bool, timeout time.Duration) ([]string, error) {
	var files []string
	for i := range r.Partitions {
		p := &r.Partitions[i]
		if !all && p.Result == porcupine.Ok {
			continue
		}
		_, info := porcupine.CheckOperationsVerbose(p.model, p.Ops, timeout)
		info.AddAnnotations(faultAnnotations(r.faults))
		path := filepath.Join(dir, p.HTMLName())
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = porcupine.Visualize(p.model, info, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("visualize %s: %w", p.Key, err)
		}
		files = append(files, path)
	}
	return files, nil
}

func faultAnnotations(faults []history.Fault) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, f := range faults {
		out = append(out, porcupine.Annotation{Tag: "faults", Start: f.Start, End: f.End,
			Description: f.Kind, Details: f.Description, BackgroundColor: "#f6d5d5"})
	}
	return out
}

// withoutCoord leaves out the coordination agents' operations: their
// tasks (cancellation retires tokens, dependencies hold claims back, flow
// control refuses them) have checkers of their own (coord*.go).
func withoutCoord(ops []history.Op) []history.Op {
	out := ops[:0:0]
	for _, op := range ops {
		if !op.In.Coord {
			out = append(out, op)
		}
	}
	return out
}
