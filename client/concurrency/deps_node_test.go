package concurrency_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// TestWorkerDependencies: a hand-off through depends_on: a worker finishes
// two upstream tasks with results; the downstream task is claimable only
// then, and its worker reads both results from the claim.
func TestWorkerDependencies(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	p := uniqueName("dep")
	up1, up2, up, down := p+"-up-1", p+"-up-2", p+"-up", p+"-down"
	for _, id := range []string{up1, up2} {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: id, Queue: up}); err != nil {
			t.Fatal(err)
		}
	}
	created, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: down, Queue: down,
		DependsOn: []string{up1, up2}})
	if err != nil {
		t.Fatal(err)
	}
	if created.DependsOnCount != 2 || created.DependenciesLeft == nil || *created.DependenciesLeft != 2 || created.DependencyPolicy != client.DependencyFail {
		t.Fatalf("created: %+v", created)
	}
	downW, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: down, Owner: "dw", Lease: 10 * time.Second, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *concurrency.Lease) error { return nil }
	if claimed, err := downW.RunOnce(ctx, noop); claimed || err != nil {
		t.Fatalf("the downstream task was claimable before its dependencies: %v %v", claimed, err)
	}
	upW, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: up, Owner: "uw", Lease: 10 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		claimed, err := upW.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
			_, err := l.Complete(ctx, "done", json.RawMessage(`{"from":"`+l.Task().TaskID+`"}`))
			return err
		})
		if !claimed || err != nil {
			t.Fatalf("upstream: %v %v", claimed, err)
		}
	}
	downW, err = concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: down, Owner: "dw", Lease: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := downW.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
		deps := l.Task().Dependencies
		if len(deps) != 2 || string(deps[0].Result) != `{"from":"`+up1+`"}` || string(deps[1].Result) != `{"from":"`+up2+`"}` ||
			deps[0].Status != "done" || l.Task().DependenciesTruncated {
			t.Errorf("the claim's dependencies: %+v", deps)
		}
		_, err := l.Complete(ctx, "done", nil)
		return err
	})
	if !claimed || err != nil {
		t.Fatalf("downstream: %v %v", claimed, err)
	}
	list, err := c.ListTaskDependencies(ctx, "acme", down, 1, "")
	if err != nil || len(list.Dependencies) != 1 || list.NextPageToken == "" {
		t.Fatalf("first page: %+v %v", list, err)
	}
	list, err = c.ListTaskDependencies(ctx, "acme", down, 1, list.NextPageToken)
	if err != nil || len(list.Dependencies) != 1 || list.Dependencies[0].TaskID != up2 || list.NextPageToken != "" {
		t.Fatalf("second page: %+v %v", list, err)
	}
}
