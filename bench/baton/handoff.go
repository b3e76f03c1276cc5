package baton

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
)

// HandoffParams size the handoff workload.
type HandoffParams struct {
	// AgentsPerStage is the number of agents working each stage.
	AgentsPerStage int
	// Pipelines is the number of research tasks created before the run:
	// the most pipelines that can start.
	Pipelines int
	// ArtifactSize is the size of each published artifact (4 KiB).
	ArtifactSize int
}

// The pipeline's stages: the queue each works, and the queue its
// transaction opens next ("" for the last, which moves a ref instead).
var handoffStages = []struct{ name, queue, next string }{
	{"researcher", "research", "review"},
	{"reviewer", "review", "publish"},
	{"publisher", "publish", ""},
}

// stagePayload travels from stage to stage in the tasks' payloads.
type stagePayload struct {
	Pipeline string `json:"pipeline"`
	// T0 is when the researcher claimed the pipeline's first task (Unix
	// nanoseconds), for the end-to-end latency.
	T0       int64  `json:"t0,omitempty"`
	Artifact string `json:"artifact,omitempty"`
}

// claimWait is how long an agent's queue claim waits for a task.
const claimWait = 200 * time.Millisecond

// Handoff is the handoff workload: researcher → reviewer → publisher.
// Each agent claims a task of its stage's queue, publishes a fenced
// artifact, and commits one transaction that finishes its task and opens
// the next stage's task (the publisher's moves the pipeline's ref
// instead). The run's operations are stage steps; the "pipeline" stage
// holds the end-to-end latency of every pipeline whose last step started
// in the window, and pipelines_per_min counts them.
func Handoff(ctx context.Context, env *Env, p Params, h HandoffParams) (*result.Run, error) {
	loadTime, err := env.Load(ctx, h.Pipelines, 8, func(i int) client.TxnOp {
		id := "p" + strconv.Itoa(i)
		return createTask(id+"-research", "research", stagePayload{Pipeline: id})
	})
	if err != nil {
		return nil, err
	}
	agents := h.AgentsPerStage * len(handoffStages)
	cs, err := env.Clients(agents)
	if err != nil {
		return nil, err
	}
	op := func(ctx context.Context, w *loadgen.Worker) error {
		return handoffStep(ctx, cs[w.ID], w, w.ID%len(handoffStages), h.ArtifactSize)
	}
	out := runLoad(ctx, p, p.loadConfig(agents), op)
	r := out.Run
	r.System, r.Workload, r.Variant = result.SystemBaton, result.WorkloadHandoff, fmt.Sprintf("A=%d", h.AgentsPerStage)
	if pl := r.Stages["pipeline"]; pl != nil && r.WindowMS > 0 {
		r.SetMetric("pipelines_per_min", float64(pl.Count)/(r.WindowMS/60000))
	}
	r.SetMetric("preload_s", loadTime.Seconds())
	r.SetMetric("artifact_bytes", float64(h.ArtifactSize))
	return r, nil
}

// handoffStep is one agent's step at stage s.
func handoffStep(ctx context.Context, c *client.Client, w *loadgen.Worker, s, size int) error {
	st := handoffStages[s]
	owner := st.name + "-" + strconv.Itoa(w.ID)
	t0 := time.Now()
	task, err := c.ClaimQueue(ctx, Tenant, st.queue, client.QueueClaimRequest{
		Owner: owner, Lease: leaseFor, Wait: claimWait})
	if err != nil {
		return fmt.Errorf("%s claim: %w", st.name, err)
	}
	if task == nil {
		return loadgen.ErrIdle
	}
	t1 := time.Now()
	w.Observe("claim", t1.Sub(t0))
	var in stagePayload
	if err := json.Unmarshal(task.Payload, &in); err != nil {
		return fmt.Errorf("%s: payload of %s: %w", st.name, task.TaskID, err)
	}
	if s == 0 {
		in.T0 = t0.UnixNano()
	}
	fence := &client.Fence{TaskID: task.TaskID, Token: task.FencingToken}
	content := make([]byte, size)
	for i := 0; i < len(content); i += 8 {
		v := w.Rand.Uint64()
		for j := 0; j < 8 && i+j < len(content); j++ {
			content[i+j] = byte(v >> (8 * j))
		}
	}
	m, err := c.UploadArtifact(ctx, Tenant, in.Pipeline+"-"+st.name, bytes.NewReader(content),
		client.UploadOptions{MediaType: "text/markdown", TaskID: task.TaskID, Fence: fence})
	if err != nil {
		return fmt.Errorf("%s publish: %w", st.name, err)
	}
	t2 := time.Now()
	w.Observe("publish", t2.Sub(t1))
	done, release := "done", true
	ops := []client.TxnOp{client.TxnUpdateTask(task.TaskID, client.UpdateTaskRequest{
		FencingToken: &task.FencingToken, Status: &done, ArtifactID: &m.ArtifactID, Release: &release})}
	if st.next != "" {
		ops = append(ops, createTask(in.Pipeline+"-"+st.next, st.next,
			stagePayload{Pipeline: in.Pipeline, T0: in.T0, Artifact: m.ArtifactID}))
	} else {
		ops = append(ops, client.TxnSetRef("pipelines/"+in.Pipeline+"/published",
			client.SetRefRequest{ArtifactID: m.ArtifactID, Fence: fence}))
	}
	if _, err := c.Txn(ctx, Tenant, ops); err != nil {
		return fmt.Errorf("%s txn: %w", st.name, err)
	}
	t3 := time.Now()
	w.Observe("txn", t3.Sub(t2))
	if st.next == "" && in.T0 != 0 {
		w.Observe("pipeline", t3.Sub(time.Unix(0, in.T0)))
	}
	return nil
}
