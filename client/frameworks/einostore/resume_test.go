package einostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/compose"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/frameworks/einostore"
	"github.com/baton-dev/baton/client/frameworks/internal/batontest"
)

// The environment of a re-executed test binary: which phase it runs, and
// the Eino checkpoint id it runs under (BATON_* say where the cluster is).
const (
	phaseEnv  = "EINOSTORE_TEST_PHASE"
	idEnv     = "EINOSTORE_TEST_CHECKPOINT_ID"
	resumeEnv = "EINOSTORE_TEST_INTERRUPT_ID"
)

// counterNS is the KV namespace where the graph's nodes count their runs.
const counterNS = "einostore-test"

// phaseResult is what a phase prints on its last line of stdout.
type phaseResult struct {
	Interrupted bool   `json:"interrupted"`
	InterruptID string `json:"interrupt_id,omitempty"` // the root cause's, for ResumeWithData
	Output      string `json:"output,omitempty"`
}

// TestResumeInAnotherProcess runs one Eino graph, draft -> review ->
// publish, in three processes that share nothing but the cluster:
//
//  1. runs draft, stops at the interrupt before review (checkpoint to
//     Baton), exits;
//  2. resumes: review interrupts itself (compose.StatefulInterrupt) to
//     ask for an approval, exits;
//  3. resumes with the approval (compose.ResumeWithData): review and
//     publish complete.
//
// Between phases 1 and 2 the leader is killed: the checkpoint is read back
// from the members that remain.
//
// The output must be built from phase 1's input (the later phases pass
// another, which a fresh run would use), and each node must have completed
// exactly once: a node counts a completed run in Baton's KV, so a
// re-execution of draft after a resume would show.
func TestResumeInAnotherProcess(t *testing.T) {
	ctx := context.Background()
	id := fmt.Sprintf("resume-%d", time.Now().UnixNano())

	r1 := runChild(t, "1", id, "")
	if !r1.Interrupted {
		t.Fatalf("phase 1 did not interrupt: %+v", r1)
	}
	// The checkpoint is in Baton, as einostore wrote it.
	cp, err := admin.LatestCheckpoint(ctx, batontest.Tenant, "eino/"+id)
	if err != nil {
		t.Fatalf("phase 1's checkpoint in Baton: %v", err)
	}
	// A graph's checkpoint is JSON (Eino's serializer), stored as JSON.
	if !bytes.Contains(cp.Metadata, []byte(`"source":"eino"`)) || !bytes.Contains(cp.Metadata, []byte(`"encoding":"json"`)) {
		t.Fatalf("phase 1's checkpoint metadata = %s", cp.Metadata)
	}
	assertRuns(t, id, map[string]int{"draft": 1, "review": 0, "publish": 0})

	// The leader that took the checkpoint dies before anyone resumes.
	killLeader(t)

	r2 := runChild(t, "2", id, "")
	if !r2.Interrupted || r2.InterruptID == "" {
		t.Fatalf("phase 2 did not interrupt in review: %+v", r2)
	}
	assertRuns(t, id, map[string]int{"draft": 1, "review": 0, "publish": 0})

	r3 := runChild(t, "3", id, r2.InterruptID)
	if r3.Interrupted {
		t.Fatalf("phase 3 interrupted again: %+v", r3)
	}
	if want := "topic-1: drafted, approved by alice, published"; r3.Output != want {
		t.Fatalf("output = %q, want %q", r3.Output, want)
	}
	assertRuns(t, id, map[string]int{"draft": 1, "review": 1, "publish": 1})
}

// killLeader kills the cluster's leader and waits for another; the test's
// cleanup starts it again and waits for the three to agree.
func killLeader(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := testCluster.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := testCluster.Kill(leader); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := testCluster.Restart(ctx, leader); err != nil {
			t.Errorf("restarting node %d: %v", leader, err)
			return
		}
		if _, err := testCluster.WaitConverged(ctx); err != nil {
			t.Errorf("after restarting node %d: %v", leader, err)
		}
	})
	var others []int
	for i := range testCluster.Size() {
		if i != leader {
			others = append(others, i)
		}
	}
	if _, err := testCluster.WaitLeader(ctx, others...); err != nil {
		t.Fatal(err)
	}
}

// runChild runs phase of the test in a new process of this test binary
// and returns what it printed.
func runChild(t *testing.T, phase, id, interruptID string) phaseResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testCluster.Env()...)
	cmd.Env = append(cmd.Env, phaseEnv+"="+phase, idEnv+"="+id, resumeEnv+"="+interruptID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("phase %s: %v\nstdout:\n%s\nstderr:\n%s", phase, err, stdout.String(), stderr.String())
	}
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var r phaseResult
	if err := json.Unmarshal(lines[len(lines)-1], &r); err != nil {
		t.Fatalf("phase %s printed %q: %v", phase, stdout.String(), err)
	}
	return r
}

func assertRuns(t *testing.T, id string, want map[string]int) {
	t.Helper()
	for node, n := range want {
		got, _, err := runs(context.Background(), admin, id, node)
		if err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("node %s completed %d times, want %d", node, got, n)
		}
	}
}

// runPhase is a child process's whole life: build the graph, run or
// resume it, print the result. Its exit code is non-zero on any failure.
func runPhase(phase string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := phaseMain(ctx, phase)
	if err != nil {
		fmt.Fprintf(os.Stderr, "phase %s: %v\n", phase, err)
		return 1
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

func phaseMain(ctx context.Context, phase string) (phaseResult, error) {
	if strings.HasPrefix(phase, "agent-") {
		return agentPhase(ctx, phase)
	}
	c, err := client.FromEnv()
	if err != nil {
		return phaseResult{}, err
	}
	id := os.Getenv(idEnv)
	store, err := einostore.New(c, batontest.Tenant, einostore.Options{Prefix: "eino/"})
	if err != nil {
		return phaseResult{}, err
	}
	g, err := buildGraph(ctx, c, id, store)
	if err != nil {
		return phaseResult{}, err
	}
	input := "topic-" + phase // later phases' input must not be used
	if phase == "3" {
		ctx = compose.ResumeWithData(ctx, os.Getenv(resumeEnv), "alice")
	}
	out, err := g.Invoke(ctx, input, compose.WithCheckPointID(id))
	if info, ok := compose.ExtractInterruptInfo(err); ok {
		r := phaseResult{Interrupted: true}
		for _, ic := range info.InterruptContexts {
			if ic.IsRootCause {
				r.InterruptID = ic.ID
			}
		}
		if phase == "1" {
			r.InterruptID = "" // the static interrupt: resumed without data
		}
		return r, nil
	}
	if err != nil {
		return phaseResult{}, err
	}
	return phaseResult{Output: out}, nil
}

// buildGraph is the graph every phase builds alike: draft -> review ->
// publish, interrupted before review, on store. Each node counts its
// completed runs in KV (before it returns, so a node that completed is
// counted even if the process died right after).
func buildGraph(ctx context.Context, c *client.Client, id string, store *einostore.Store) (compose.Runnable[string, string], error) {
	g := compose.NewGraph[string, string]()
	count := func(ctx context.Context, node string) error { return countRun(ctx, c, id, node) }
	err := errors.Join(
		g.AddLambdaNode("draft", compose.InvokableLambda(func(ctx context.Context, in string) (string, error) {
			return in + ": drafted", count(ctx, "draft")
		})),
		g.AddLambdaNode("review", compose.InvokableLambda(func(ctx context.Context, in string) (string, error) {
			// Ask for an approval unless this run resumes this node with
			// one. Eino does not keep the input of a node that interrupted
			// itself: the node keeps it as its interrupt state.
			if was, has, saved := compose.GetInterruptState[string](ctx); was && has {
				in = saved
			}
			isTarget, hasData, who := compose.GetResumeContext[string](ctx)
			if !isTarget || !hasData {
				return "", compose.StatefulInterrupt(ctx, "approve the draft", in)
			}
			return in + ", approved by " + who, count(ctx, "review")
		})),
		g.AddLambdaNode("publish", compose.InvokableLambda(func(ctx context.Context, in string) (string, error) {
			return in + ", published", count(ctx, "publish")
		})),
		g.AddEdge(compose.START, "draft"),
		g.AddEdge("draft", "review"),
		g.AddEdge("review", "publish"),
		g.AddEdge("publish", compose.END),
	)
	if err != nil {
		return nil, err
	}
	return g.Compile(ctx,
		compose.WithGraphName("approval"),
		compose.WithCheckPointStore(store),
		compose.WithInterruptBeforeNodes([]string{"review"}))
}

// countRun adds one to node's count of completed runs, by compare-and-set.
func countRun(ctx context.Context, c *client.Client, id, node string) error {
	for {
		n, version, err := runs(ctx, c, id, node)
		if err != nil {
			return err
		}
		_, err = c.PutKV(ctx, batontest.Tenant, counterNS, id+"."+node, client.PutKVRequest{
			Value:         json.RawMessage(strconv.Itoa(n + 1)),
			ExpectVersion: &version,
		})
		if !errors.Is(err, client.ErrVersionMismatch) {
			return err
		}
	}
}

// runs is node's count of completed runs and the version of its entry (0
// when it has none).
func runs(ctx context.Context, c *client.Client, id, node string) (int, uint64, error) {
	e, err := c.GetKV(ctx, batontest.Tenant, counterNS, id+"."+node)
	if errors.Is(err, client.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	n, err := strconv.Atoi(string(e.Value))
	return n, e.Version, err
}
