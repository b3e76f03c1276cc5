package einostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/frameworks/einostore"
	"github.com/baton-dev/baton/client/frameworks/internal/batontest"
)

// TestAgentResumesInAnotherProcess: Eino's ADK Runner takes the same
// store. Its checkpoints are gob, not JSON, so they travel as base64. An
// agent asks for an approval (adk.StatefulInterrupt, keeping the request
// as its state) in one process, which exits; another resumes it with the
// approval (Runner.ResumeWithParams) and gets the agent's answer, built
// from the first process's request.
func TestAgentResumesInAnotherProcess(t *testing.T) {
	id := fmt.Sprintf("agent-%d", time.Now().UnixNano())
	r1 := runChild(t, "agent-1", id, "")
	if !r1.Interrupted || r1.InterruptID == "" {
		t.Fatalf("agent phase 1 did not interrupt: %+v", r1)
	}
	cp, err := admin.LatestCheckpoint(context.Background(), batontest.Tenant, "eino/"+id)
	if err != nil {
		t.Fatalf("the agent's checkpoint in Baton: %v", err)
	}
	if !bytes.Contains(cp.Metadata, []byte(`"encoding":"base64"`)) {
		t.Fatalf("the agent's checkpoint metadata = %s, want base64 (ADK checkpoints are gob)", cp.Metadata)
	}
	r2 := runChild(t, "agent-2", id, r1.InterruptID)
	if want := "deploy v2: approved by alice"; r2.Output != want || r2.Interrupted {
		t.Fatalf("agent phase 2 = %+v, want output %q", r2, want)
	}
}

// approver is an agent that asks for an approval of its input and, once
// resumed with one, answers with both.
type approver struct{}

func (approver) Name(context.Context) string        { return "approver" }
func (approver) Description(context.Context) string { return "asks a person to approve" }

func (approver) Run(ctx context.Context, in *adk.AgentInput, _ ...adk.AgentRunOption) *adk.AsyncIterator[*adk.AgentEvent] {
	iter, gen := adk.NewAsyncIteratorPair[*adk.AgentEvent]()
	request := ""
	if len(in.Messages) > 0 {
		request = in.Messages[len(in.Messages)-1].Content
	}
	gen.Send(adk.StatefulInterrupt(ctx, "approve: "+request, request))
	gen.Close()
	return iter
}

func (approver) Resume(_ context.Context, info *adk.ResumeInfo, _ ...adk.AgentRunOption) *adk.AsyncIterator[*adk.AgentEvent] {
	iter, gen := adk.NewAsyncIteratorPair[*adk.AgentEvent]()
	request, _ := info.InterruptState.(string)
	who, _ := info.ResumeData.(string)
	gen.Send(&adk.AgentEvent{Output: &adk.AgentOutput{MessageOutput: &adk.MessageVariant{
		Message: schema.AssistantMessage(request+": approved by "+who, nil),
	}}})
	gen.Close()
	return iter
}

// agentPhase is a child process of TestAgentResumesInAnotherProcess.
func agentPhase(ctx context.Context, phase string) (phaseResult, error) {
	c, err := client.FromEnv()
	if err != nil {
		return phaseResult{}, err
	}
	store, err := einostore.New(c, batontest.Tenant, einostore.Options{Prefix: "eino/"})
	if err != nil {
		return phaseResult{}, err
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: approver{}, CheckPointStore: store})
	id := os.Getenv(idEnv)
	var iter *adk.AsyncIterator[*adk.AgentEvent]
	switch phase {
	case "agent-1":
		iter = runner.Query(ctx, "deploy v2", adk.WithCheckPointID(id))
	case "agent-2":
		iter, err = runner.ResumeWithParams(ctx, id, &adk.ResumeParams{Targets: map[string]any{os.Getenv(resumeEnv): "alice"}})
		if err != nil {
			return phaseResult{}, err
		}
	default:
		return phaseResult{}, fmt.Errorf("no phase %q", phase)
	}
	var r phaseResult
	for {
		ev, ok := iter.Next()
		if !ok {
			return r, nil
		}
		switch {
		case ev.Err != nil:
			return phaseResult{}, ev.Err
		case ev.Action != nil && ev.Action.Interrupted != nil:
			r.Interrupted = true
			for _, ic := range ev.Action.Interrupted.InterruptContexts {
				if ic.IsRootCause {
					r.InterruptID = ic.ID
				}
			}
		case ev.Output != nil && ev.Output.MessageOutput != nil:
			m, err := ev.Output.MessageOutput.GetMessage()
			if err != nil {
				return phaseResult{}, err
			}
			r.Output += m.Content
		default:
			return phaseResult{}, errors.New("an event with neither output nor interrupt")
		}
	}
}
