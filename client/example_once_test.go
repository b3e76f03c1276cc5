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

// Once runs an external action at most once per op id, whatever the
// retries and restarts: a second call returns the recorded result.
func ExampleClient_Once() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	req := client.OnceRequest{
		OpID:   "notify:report-42", // stable across retries
		Kind:   "email.send",
		Params: map[string]string{"to": "ada@example.com"},
	}
	send := func(ctx context.Context) (json.RawMessage, error) {
		fmt.Println("sending the email")
		return json.RawMessage(`{"message_id":"m-1"}`), nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		result, err := c.Once(ctx, "acme", req, send)
		if err != nil {
			log.Fatal(err) // errors.Is(err, client.ErrOpInDoubt) asks the caller to check the outside world
		}
		fmt.Println("attempt", attempt, string(result))
	}
	// Output:
	// sending the email
	// attempt 1 {"message_id":"m-1"}
	// attempt 2 {"message_id":"m-1"}
}
