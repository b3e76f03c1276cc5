package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/baton-dev/baton/client"
)

// Keep a thread's checkpoints, as a LangGraph checkpointer does: each
// checkpoint names its parent, pending writes attach to a checkpoint, and
// the latest one is read back with them.
func ExampleClient_PutCheckpoint() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.PutCheckpoint(ctx, "acme", "chat-7", "cp-1", client.PutCheckpointRequest{Data: json.RawMessage(`{"step":1}`)})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.PutCheckpoint(ctx, "acme", "chat-7", "cp-2", client.PutCheckpointRequest{ParentID: "cp-1", Data: json.RawMessage(`{"step":2}`)})
	if err != nil {
		log.Fatal(err)
	}
	err = c.PutWrites(ctx, "acme", "chat-7", "cp-2", client.PutWritesRequest{TaskID: "step-3",
		Writes: []client.Write{{Channel: "messages", Value: json.RawMessage(`"hi"`)}}})
	if err != nil {
		log.Fatal(err)
	}

	latest, err := c.LatestCheckpoint(ctx, "acme", "chat-7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(latest.CheckpointID, "parent", latest.ParentID, "writes", latest.PendingWrites[0].Channel, string(latest.PendingWrites[0].Value))

	list, err := c.ListCheckpoints(ctx, "acme", "chat-7", client.ListCheckpointsOptions{Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, cp := range list {
		fmt.Println(cp.CheckpointID)
	}
	// Output:
	// cp-2 parent cp-1 writes messages "hi"
	// cp-2
	// cp-1
}
