package concurrency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// A Worker claims tasks from a queue, renews the lease while the work
// runs and cancels the work's context if the lease is lost. Run loops
// until its context ends; RunOnce takes a single task.
func ExampleWorker() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: "mail-1", Queue: "emails",
		Payload: json.RawMessage(`{"to":"ada@example.com"}`)})
	if err != nil {
		log.Fatal(err)
	}

	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: "emails", Owner: "mailer-1",
		Lease: 30 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	claimed, err := w.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
		fmt.Println("sending", l.Task().TaskID, string(l.Task().Payload))
		// Writes elsewhere can be fenced with l.Fence() or l.Guarded.
		_, err := l.Complete(ctx, "done", json.RawMessage(`{"sent":true}`))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	t, err := c.GetTask(ctx, "acme", "mail-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(claimed, t.Status, string(t.Result))
	// Output:
	// sending mail-1 {"to":"ada@example.com"}
	// true done {"sent":true}
}
