package concurrency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// Once runs an external action at most once per op id, whatever the
// retries and restarts: a second call returns the recorded result.
func ExampleOnce() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	req := concurrency.OnceRequest{
		OpID:   "notify:report-42", // stable across retries
		Kind:   "email.send",
		Params: map[string]string{"to": "ada@example.com"},
	}
	send := func(ctx context.Context) (json.RawMessage, error) {
		fmt.Println("sending the email")
		return json.RawMessage(`{"message_id":"m-1"}`), nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		result, err := concurrency.Once(ctx, c, "acme", req, send)
		if err != nil {
			log.Fatal(err) // errors.Is(err, concurrency.ErrOpInDoubt) asks the caller to check the outside world
		}
		fmt.Println("attempt", attempt, string(result))
	}
	// Output:
	// sending the email
	// attempt 1 {"message_id":"m-1"}
	// attempt 2 {"message_id":"m-1"}
}
