package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/baton-dev/baton/client"
)

// Connect to a cluster: any node's endpoint will do, more give failover.
// Use https:// endpoints and Config.CAFile (or Config.TLS) for TLS.
func ExampleNew() {
	c, err := client.New(client.Config{
		Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), // e.g. https://10.0.0.1:7001
		Token:     os.Getenv("BATON_TOKEN"),
	})
	if err != nil {
		log.Fatal(err)
	}
	tenants, err := c.ListTenants(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tenants)
	// Output: [acme]
}

// Claim a task, write under its fencing token, and see a stale token
// refused once another agent has claimed the task.
func ExampleClient_ClaimTask() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: "report-42", Queue: "research"}); err != nil {
		log.Fatal(err)
	}

	// agent-1 leases the task; the claim carries a new fencing token.
	t, err := c.ClaimTask(ctx, "acme", "report-42", client.ClaimRequest{Owner: "agent-1", Lease: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	token := t.FencingToken
	running := "running"
	t, err = c.UpdateTask(ctx, "acme", "report-42", client.UpdateTaskRequest{FencingToken: &token, Status: &running})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("agent-1 set", t.Status)

	// agent-1 stalls, its lease ends (released here, to be quick) and
	// agent-2 claims the task.
	release := true
	if _, err := c.UpdateTask(ctx, "acme", "report-42", client.UpdateTaskRequest{FencingToken: &token, Release: &release}); err != nil {
		log.Fatal(err)
	}
	t, err = c.ClaimTask(ctx, "acme", "report-42", client.ClaimRequest{Owner: "agent-2", Lease: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}

	// agent-1's late write, under its old token, cannot land.
	done := "done"
	_, err = c.UpdateTask(ctx, "acme", "report-42", client.UpdateTaskRequest{FencingToken: &token, Status: &done})
	fmt.Println("agent-1 fenced:", errors.Is(err, client.ErrFenced))

	t, err = c.UpdateTask(ctx, "acme", "report-42", client.UpdateTaskRequest{FencingToken: &t.FencingToken,
		Status: &done, Result: json.RawMessage(`{"pages":12}`), Release: &release})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("agent-2 set", t.Status, string(t.Result))
	// Output:
	// agent-1 set running
	// agent-1 fenced: true
	// agent-2 set done {"pages":12}
}
