package client_test

import (
	"encoding/json"
	"testing"

	"github.com/baton-dev/baton/client"
)

func TestOpRequestShapes(t *testing.T) {
	runShapes(t, []shapeCase{
		{"BeginOp", func(c *client.Client) error {
			_, _, err := c.BeginOp(bg, "acme", "notify:r42", client.BeginOpRequest{Kind: "email.send", ParamsDigest: "sha256:ab", TaskID: "r42"})
			return err
		}, "POST", "/v1/tenants/acme/ops/notify:r42/begin", "", `{"kind":"email.send","params_digest":"sha256:ab","task_id":"r42"}`},
		{"FinishOp", func(c *client.Client) error {
			_, err := c.FinishOp(bg, "acme", "notify:r42", client.FinishOpRequest{State: client.OpSucceeded, Result: json.RawMessage(`{"id":"m1"}`),
				Fence: &client.Fence{TaskID: "r42", Token: 7}})
			return err
		}, "POST", "/v1/tenants/acme/ops/notify:r42/finish", "", `{"state":"succeeded","result":{"id":"m1"},"fence":{"task_id":"r42","token":7}}`},
		{"GetOp", func(c *client.Client) error { _, err := c.GetOp(bg, "acme", "notify:r42"); return err },
			"GET", "/v1/tenants/acme/ops/notify:r42", "", ``},
	})
}

func TestBeginOpCreated(t *testing.T) {
	c := newClient(t, env.URL())
	op := uniqueName("o")
	for _, want := range []bool{true, false} { // 201, then 200 for the same op
		got, created, err := c.BeginOp(bg, "acme", op, client.BeginOpRequest{Kind: "k", ParamsDigest: "d"})
		if err != nil || created != want || got.State != client.OpStarted || got.OpID != op {
			t.Errorf("got %+v created=%v err=%v, want op %s started, created=%v", got, created, err, op, want)
		}
	}
}

func TestParamsDigestCanonical(t *testing.T) {
	type params struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
		N       int    `json:"n"`
	}
	same := []any{
		params{To: "a@example.com", Subject: "<hi> & bye", N: 3},
		map[string]any{"subject": "<hi> & bye", "n": 3, "to": "a@example.com"},
		json.RawMessage(`{ "n": 3, "to": "a@example.com",  "subject": "<hi> & bye" }`),
	}
	want, err := client.ParamsDigest(same[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len("sha256:")+64 || want[:7] != "sha256:" {
		t.Fatalf("got digest %q, want sha256:<64 hex>", want)
	}
	for i, p := range same[1:] {
		if got, _ := client.ParamsDigest(p); got != want {
			t.Errorf("form %d: got %s, want %s", i+1, got, want)
		}
	}
	other, _ := client.ParamsDigest(params{To: "a@example.com", Subject: "<hi> & bye", N: 4})
	if other == want {
		t.Errorf("got the same digest for other params")
	}
	if _, err := client.ParamsDigest(func() {}); err == nil {
		t.Errorf("got no error for params that are not JSON")
	}
}
