package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// rawWrite sends one write with the admin token and, if sid is not 0, a
// place in client session sid. It returns status, body and the
// Idempotent-Replay header.
func rawWrite(ctx context.Context, hc *http.Client, url, token, method, path string, body any, sid, seq, ack uint64) (int, []byte, bool, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, url+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if sid != 0 {
		req.Header.Set("X-Baton-Session", strconv.FormatUint(sid, 10))
		req.Header.Set("X-Baton-Seq", strconv.FormatUint(seq, 10))
		req.Header.Set("X-Baton-Ack", strconv.FormatUint(ack, 10))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header.Get("Idempotent-Replay") == "true", err
}

// rawWriteRetried is rawWrite retried while the cluster is unavailable
// (an election: 503, or 504 outcome_unknown when leadership was lost
// after proposing), for up to 20 seconds: a retry in a session is safe.
func rawWriteRetried(ctx context.Context, hc *http.Client, url, token, method, path string, body any, sid, seq, ack uint64) (int, []byte, bool, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, b, replay, err := rawWrite(ctx, hc, url, token, method, path, body, sid, seq, ack)
		again := st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout
		if (err == nil && !again) || time.Now().After(deadline) || ctx.Err() != nil {
			return st, b, replay, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawOpenSession opens a client session through node url.
func rawOpenSession(ctx context.Context, hc *http.Client, url, token string) (uint64, error) {
	st, body, _, err := rawWriteRetried(ctx, hc, url, token, http.MethodPost, "/v1/sessions", map[string]any{}, 0, 0, 0)
	if err != nil || st != http.StatusCreated {
		return 0, fmt.Errorf("open session: %d %s %v", st, body, err)
	}
	var v struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, err
	}
	return strconv.ParseUint(v.SessionID, 10, 64)
}

// httpFor is a client for c's nodes, over TLS when c runs it.
func httpFor(c *cluster.Cluster) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.ClientTLS()}}
}

// sessionBytes is retries.session_bytes of node i's /v1/cluster.
func sessionBytes(ctx context.Context, c *cluster.Cluster, i int) (int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(i)+"/v1/cluster?consistency=stale", nil)
	req.Header.Set("Authorization", "Bearer "+c.AdminToken())
	resp, err := httpFor(c).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Retries struct {
			SessionBytes int64 `json:"session_bytes"`
		} `json:"retries"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/v1/cluster: %s", resp.Status)
	}
	return st.Retries.SessionBytes, json.NewDecoder(resp.Body).Decode(&st)
}

// TestSessionRetryAfterLeaderKillAppliedOnce: a claim made in a client
// session is retried, with the same session place, through the survivors
// after the leader is SIGKILLed: the first answer comes back as a replay
// and the task was claimed once (attempt 1, the first fencing token).
func TestSessionRetryAfterLeaderKillAppliedOnce(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	admin := adminClient(t, c)
	hc := httpFor(c)
	const tenant = "sess"
	if _, err := admin.PutTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTask(ctx, tenant, client.CreateTaskRequest{TaskID: "t1", Queue: "q", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := rawOpenSession(ctx, hc, c.URL(leader), c.AdminToken())
	if err != nil {
		t.Fatal(err)
	}
	claim := map[string]any{"owner": "w1", "lease_ms": 60000}
	path := "/v1/tenants/" + tenant + "/tasks/t1/claim"
	st, first, replay, err := rawWrite(ctx, hc, c.URL(leader), c.AdminToken(), http.MethodPost, path, claim, sid, 1, 1)
	if err != nil || st != http.StatusOK || replay {
		t.Fatalf("claim: %d %s replay %v %v", st, first, replay, err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	survivor := foundationOthers(c, leader)[0]
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, again, replay, err := rawWrite(ctx, hc, c.URL(survivor), c.AdminToken(), http.MethodPost, path, claim, sid, 1, 1)
		// 503, and 504 outcome_unknown (a survivor that forwarded to the
		// killed leader before it learned of the kill), are answers a
		// retry from the same session place is for, as the SDKs retry them.
		if err == nil && st != http.StatusServiceUnavailable && st != http.StatusGatewayTimeout {
			if st != http.StatusOK || !replay || !bytes.Equal(again, first) {
				t.Fatalf("retry after the leader's kill: %d replay %v %s; want the first answer %s replayed", st, replay, again, first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer from the survivors: %d %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	viaSurvivors, err := client.New(client.Config{Endpoints: []string{c.URL(survivor)}, Token: c.AdminToken(), TLS: c.ClientTLS(), MaxRetry: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	task, err := viaSurvivors.GetTask(ctx, tenant, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var claimed client.Task
	if err := json.Unmarshal(first, &claimed); err != nil {
		t.Fatal(err)
	}
	if task.Attempt != 1 || task.FencingToken != claimed.FencingToken || task.Version != claimed.Version {
		t.Errorf("after the retry: attempt %d token %d version %d; want attempt 1 and the first claim's token %d version %d",
			task.Attempt, task.FencingToken, task.Version, claimed.FencingToken, claimed.Version)
	}
	// Once acknowledged (ack 2), the write is refused, not applied again.
	st, body, _, err := rawWriteRetried(ctx, hc, c.URL(survivor), c.AdminToken(), http.MethodPost, path,
		map[string]any{"owner": "w2", "lease_ms": 60000}, sid, 2, 2)
	if err != nil || st != http.StatusConflict || !bytes.Contains(body, []byte("lease_held")) {
		t.Fatalf("write 2: %d %s %v; want lease_held (w1 holds the lease)", st, body, err)
	}
	st, body, _, err = rawWriteRetried(ctx, hc, c.URL(survivor), c.AdminToken(), http.MethodPost, path, claim, sid, 1, 1)
	if err != nil || st != http.StatusConflict || !bytes.Contains(body, []byte("idempotency_expired")) {
		t.Errorf("acknowledged write retried: %d %s %v; want 409 idempotency_expired", st, body, err)
	}
}

// TestSessionStateBoundedUnderWrites: the bytes client sessions keep stay
// flat while one client keeps writing (each write acknowledges the ones
// before), and stay within --session-bytes while clients keep opening
// sessions: the least recently used are dropped, and a retry on one of
// them is refused, not applied again.
func TestSessionStateBoundedUnderWrites(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	const budget = 1 << 20
	// One tenant fills the whole budget: its own bound (a quarter by
	// default) is the whole budget here.
	c := startCluster(t, 3, fmt.Sprintf("--session-bytes=%d", budget), fmt.Sprintf("--session-tenant-bytes=%d", budget))
	ctx := ctxFor(t, 120*time.Second)
	hc := httpFor(c)
	admin := adminClient(t, c)
	const tenant = "bound"
	if _, err := admin.PutTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	put := func(cl *client.Client, key string, n int) error {
		_, err := cl.PutKV(ctx, tenant, "ns", key, client.PutKVRequest{Value: json.RawMessage(strconv.Itoa(n))})
		return err
	}
	// One client, many writes: the session keeps the writes in flight only.
	if err := put(admin, "warm", 0); err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := func(what string) int64 {
		b, err := sessionBytes(ctx, c, leader)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return b
	}
	before := at("after the first write")
	for i := range 300 {
		if err := put(admin, "k", i); err != nil {
			t.Fatal(err)
		}
	}
	if after := at("after 300 writes"); after > before+2048 {
		t.Errorf("one client's session: %d bytes after 1 write, %d after 300 more; want flat", before, after)
	}

	// Many clients: each opens a session and writes once.
	var mu sync.Mutex
	var sessions []uint64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				sid, err := rawOpenSession(ctx, hc, c.URL(w%3), c.AdminToken())
				if err != nil {
					errs <- err
					return
				}
				body := map[string]any{"value": i}
				st, b, _, err := rawWriteRetried(ctx, hc, c.URL(w%3), c.AdminToken(), http.MethodPut,
					fmt.Sprintf("/v1/tenants/%s/kv/ns/w%d-%d", tenant, w, i), body, sid, 1, 1)
				if err != nil || st != http.StatusOK {
					errs <- fmt.Errorf("write: %d %s %v", st, b, err)
					return
				}
				mu.Lock()
				sessions = append(sessions, sid)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	most := int64(0)
	for i := range 3 {
		b, err := sessionBytes(ctx, c, i)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, b)
		t.Logf("%s: sessions keep %d bytes (budget %d) after %d sessions", c.ID(i), b, budget, len(sessions))
		if b > budget {
			t.Errorf("%s: sessions keep %d bytes, over --session-bytes %d", c.ID(i), b, budget)
		}
	}
	if most < budget/2 {
		t.Errorf("sessions keep at most %d bytes: the test did not reach the budget", most)
	}
	// The first sessions were dropped: a retry on one is refused.
	st, body, _, err := rawWriteRetried(ctx, hc, c.URL(0), c.AdminToken(), http.MethodPut,
		fmt.Sprintf("/v1/tenants/%s/kv/ns/w0-0", tenant), map[string]any{"value": 0}, sessions[0], 1, 1)
	if err != nil || st != http.StatusConflict || !bytes.Contains(body, []byte("idempotency_expired")) {
		t.Errorf("retry in a dropped session: %d %s %v; want 409 idempotency_expired", st, body, err)
	}
}
