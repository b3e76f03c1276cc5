package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/baton-dev/baton/client"
)

// Read the current state, then watch the changes after it: no change is
// missed between the read and the watch.
func ExampleClient_Watch() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	var meta client.Meta
	if _, err := c.ListKV(ctx, "acme", "notes", client.ListKVOptions{}, client.CaptureMeta(&meta)); err != nil {
		log.Fatal(err)
	}
	w := c.Watch(ctx, "acme", client.WatchOptions{Resources: []string{"kv"}, Prefix: "notes/", FromIndex: meta.Index})
	defer w.Close()

	_, err = c.PutKV(ctx, "acme", "notes", "todo", client.PutKVRequest{Value: json.RawMessage(`"write the report"`),
		TTL: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	ev, err := w.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Resource, ev.Type, ev.Key)
	// Output: kv put notes/todo
}
