package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// rawGet sends a GET with token to url and returns the response (body
// unread) or an error.
func rawGet(ctx context.Context, hc *http.Client, url, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return hc.Do(req)
}

// TestRateLimitsAndWatchCap: a tenant's principals over the rate the admin
// set get 429 rate_limited with Retry-After (the admin does not), and the
// Go client waits them out; a principal holding its cap of watches on a
// node gets 429 for one more, until one ends.
func TestRateLimitsAndWatchCap(t *testing.T) {
	c := startCluster(t, 3, "--max-watches-per-principal=2")
	ctx := ctxFor(t, 60*time.Second)
	admin := adminClient(t, c)
	hc := httpFor(c)
	if _, err := admin.PutTenant(ctx, "rl"); err != nil {
		t.Fatal(err)
	}
	p, err := admin.CreatePrincipal(ctx, "rl", "agent", []client.Grant{{Resource: "kv", Prefix: "", Actions: []string{"read", "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetTenantQuota(ctx, "rl", client.TenantQuota{RatePerSec: 5, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	url := c.URL(0) + "/v1/tenants/rl/kv/ns?consistency=stale"
	// The quota reaches node 0 through the log: poll until it bites.
	limited, retryAfter := 0, ""
	deadline := time.Now().Add(10 * time.Second)
	for limited == 0 && time.Now().Before(deadline) {
		for range 20 {
			resp, err := rawGet(ctx, hc, url, p.Token)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				limited++
				retryAfter = resp.Header.Get("Retry-After")
			}
		}
	}
	if limited == 0 || retryAfter == "" {
		t.Fatalf("20 quick reads at 5/s: %d got 429 (Retry-After %q); want some, with Retry-After", limited, retryAfter)
	}
	for range 20 {
		resp, err := rawGet(ctx, hc, url, c.AdminToken())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the admin's read: %s, want 200 (no rate)", resp.Status)
		}
	}
	agent, err := client.New(client.Config{Endpoints: []string{c.URL(0)}, Token: p.Token, TLS: c.ClientTLS(), MaxRetry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := agent.PutKV(ctx, "rl", "ns", "k", client.PutKVRequest{Value: json.RawMessage(`1`)}); err != nil {
			t.Fatalf("write %d through the client: %v (it must wait out 429s)", i, err)
		}
	}

	// Watches: two open, a third refused, one closed, the third served.
	open := func() (*http.Response, error) {
		return rawGet(ctx, hc, c.URL(1)+"/v1/tenants/rl/watch?resources=kv", p.Token)
	}
	if _, err := admin.SetTenantQuota(ctx, "rl", client.TenantQuota{}); err != nil { // no rate: only the cap counts
		t.Fatal(err)
	}
	var held []*http.Response
	deadline = time.Now().Add(10 * time.Second)
	for len(held) < 2 {
		resp, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			held = append(held, resp)
			continue
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("watch: %s", resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := open()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third watch with a cap of 2: %s, want 429", resp.Status)
	}
	held[0].Body.Close()
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, err := open()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a watch after one of two ended: %s, want 200", resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	held[1].Body.Close()
	var e *client.Error
	if _, err := agent.GetKV(ctx, "rl", "ns", "k"); err != nil && !errors.As(err, &e) {
		t.Fatal(err)
	}
}
