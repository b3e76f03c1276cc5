package concurrency_test

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
	"github.com/baton-dev/baton/client/concurrency"
)

// A Mutex is a lock across agents, fenced: the holder's writes carry its
// Fence, so that once it has lost the lock (paused past its lease, cut
// off) they are refused instead of overwriting its successor's.
func ExampleMutex() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	m, err := concurrency.NewMutex(c, concurrency.MutexConfig{Tenant: "acme", Name: "lock.reindex", Owner: "agent-1", Lease: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	l, err := m.Lock(ctx) // waits while another agent holds it
	if err != nil {
		log.Fatal(err)
	}
	// Guarded refuses locally once the lease is known lost; the Fence
	// makes the cluster refuse it (ErrFenced) once another agent took over.
	err = l.Guarded(ctx, func(ctx context.Context, fence client.Fence) error {
		_, err := c.PutKV(ctx, "acme", "index", "state", client.PutKVRequest{Value: json.RawMessage(`"rebuilt"`), Fence: &fence})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	other, _ := concurrency.NewMutex(c, concurrency.MutexConfig{Tenant: "acme", Name: "lock.reindex", Owner: "agent-2"})
	_, err = other.TryLock(ctx)
	fmt.Println("agent-2:", errors.Is(err, concurrency.ErrLocked))
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	l2, err := other.TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("agent-2 after unlock:", l2.Token() > l.Token())
	// The first holder's token is stale now: a write under it is refused.
	_, err = c.PutKV(ctx, "acme", "index", "state", client.PutKVRequest{Value: json.RawMessage(`"stale"`), Fence: new(l.Fence())})
	fmt.Println("stale write:", errors.Is(err, client.ErrFenced))
	if err := other.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// agent-2: true
	// agent-2 after unlock: true
	// stale write: true
}

// An Election elects one leader among contenders; Leader reads who leads
// and its value, Observe streams every leader and value as they change.
// The leader's Lease fences its writes as a Mutex's does.
func ExampleElection() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	e, err := concurrency.NewElection(c, concurrency.MutexConfig{Tenant: "acme", Name: "elect.planner", Owner: "planner-1"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := e.Campaign(ctx, "http://10.0.0.7:8080"); err != nil { // waits until elected
		log.Fatal(err)
	}
	li, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(li.Owner, li.Value)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes := e.Observe(octx) // the current leader first
	fmt.Println((<-changes).Value)
	if err := e.Proclaim(ctx, "http://10.0.0.7:9090"); err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-changes).Value)
	if err := e.Resign(ctx); err != nil { // another contender is elected at once
		log.Fatal(err)
	}
	_, err = e.Leader(ctx)
	fmt.Println(errors.Is(err, concurrency.ErrElectionNoLeader))
	// Output:
	// planner-1 http://10.0.0.7:8080
	// http://10.0.0.7:8080
	// http://10.0.0.7:9090
	// true
}
