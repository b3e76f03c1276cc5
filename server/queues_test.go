package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

type queueStatsBody struct {
	Queue              string           `json:"queue"`
	Tasks              int64            `json:"tasks"`
	ByStatus           map[string]int64 `json:"by_status"`
	Waiting            int64            `json:"waiting"`
	DueLater           int64            `json:"due_later"`
	Dead               int64            `json:"dead"`
	OldestPendingAt    *string          `json:"oldest_pending_at"`
	OldestPendingAgeMs int64            `json:"oldest_pending_age_ms"`
	ClaimsPerMinute    int64            `json:"claims_per_minute"`
	AsOf               string           `json:"as_of"`
}

type queueListBody struct {
	Queues        []queueStatsBody `json:"queues"`
	NextPageToken string           `json:"next_page_token"`
}

func (fx *apiFixture) get(t *testing.T, path string, auth map[string]string, want int, v any) {
	t.Helper()
	status, _, body := fx.c.do(t, 0, "GET", path, nil, auth)
	if status != want {
		t.Fatalf("GET %s: got %d %s, want %d", path, status, body, want)
	}
	if v != nil {
		decodeBody(t, body, v)
	}
}

// TestQueueStatsHTTP: a queue's figures, the list of queues page by page,
// and grants: a principal with a grant on one queue reads its figures and
// sees it alone in the list.
func TestQueueStatsHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	for _, b := range []string{`{"task_id":"a","queue":"qa"}`, `{"task_id":"b","queue":"qa","delay_ms":3600000}`,
		`{"task_id":"c","queue":"qa","status":"review"}`, `{"task_id":"d","queue":"qb"}`} {
		fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", b, adm, http.StatusCreated)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/queues/qb/claim", `{"owner":"w","lease_ms":60000}`, adm, http.StatusOK)
	var st queueStatsBody
	fx.get(t, "/v1/tenants/acme/queues/qa", adm, http.StatusOK, &st)
	if st.Tasks != 3 || st.ByStatus["pending"] != 2 || st.ByStatus["review"] != 1 || st.Waiting != 2 || st.DueLater != 1 ||
		st.Dead != 0 || st.OldestPendingAt == nil || st.ClaimsPerMinute != 0 || st.AsOf == "" {
		t.Fatalf("qa: %+v", st)
	}
	fx.get(t, "/v1/tenants/acme/queues/qb", adm, http.StatusOK, &st)
	if st.Tasks != 1 || st.Waiting != 0 || st.OldestPendingAt != nil || st.ClaimsPerMinute != 1 {
		t.Fatalf("qb: %+v", st)
	}
	fx.get(t, "/v1/tenants/acme/queues/none", adm, http.StatusOK, &st)
	if st.Tasks != 0 || st.ByStatus == nil {
		t.Fatalf("a queue without tasks: %+v", st)
	}

	var page queueListBody
	fx.get(t, "/v1/tenants/acme/queues?limit=1", adm, http.StatusOK, &page)
	if len(page.Queues) != 1 || page.Queues[0].Queue != "qa" || page.NextPageToken == "" {
		t.Fatalf("first page: %+v", page)
	}
	fx.get(t, "/v1/tenants/acme/queues?limit=1&page_token="+page.NextPageToken, adm, http.StatusOK, &page)
	if len(page.Queues) != 1 || page.Queues[0].Queue != "qb" || page.NextPageToken != "" {
		t.Fatalf("second page: %+v", page)
	}
	fx.get(t, "/v1/tenants/acme/queues?limit=0", adm, http.StatusBadRequest, nil)
	fx.get(t, "/v1/tenants/acme/queues?page_token=!!", adm, http.StatusBadRequest, nil)
	fx.get(t, "/v1/tenants/nope/queues", adm, http.StatusNotFound, nil)

	reader := fx.createPrincipal(t, adm, "acme", `{"name":"qb-reader","grants":[{"resource":"tasks","prefix":"qb","actions":["read"]}]}`)
	fx.get(t, "/v1/tenants/acme/queues/qb", bearer(reader), http.StatusOK, &st)
	fx.get(t, "/v1/tenants/acme/queues/qa", bearer(reader), http.StatusForbidden, nil)
	fx.get(t, "/v1/tenants/acme/queues", bearer(reader), http.StatusOK, &page)
	if len(page.Queues) != 1 || page.Queues[0].Queue != "qb" {
		t.Fatalf("the reader's list: %+v", page)
	}
	kv := fx.createPrincipal(t, adm, "acme", `{"name":"kv-only","grants":[{"resource":"kv","prefix":"","actions":["read"]}]}`)
	fx.get(t, "/v1/tenants/acme/queues", bearer(kv), http.StatusForbidden, nil)
}

// TestRetentionHTTP: a queue policy's retention and a task's own; the
// leader's purge loop deletes a done task once its period has passed.
func TestRetentionHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	status, _, body := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/queues/rq/policy", `{"retention_ms":300}`, adm)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"retention_ms":300}` {
		t.Fatalf("put policy: %d %s", status, body)
	}
	for _, b := range []string{`{"retention_ms":-1}`, `{"retention_ms":315360000001}`} {
		if status, _, body := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/queues/rq/policy", b, adm); status != http.StatusBadRequest {
			t.Fatalf("policy %s: %d %s", b, status, body)
		}
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"x","queue":"rq","retention_ms":-5}`, adm, http.StatusBadRequest)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"kept","queue":"rq","retention_ms":3600000}`, adm, http.StatusCreated)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"r1","queue":"rq"}`, adm, http.StatusCreated)
	var done struct {
		ExpiresAt *string `json:"expires_at"`
	}
	status, _, body = fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/r1/update", `{"status":"done"}`, adm)
	if decodeBody(t, body, &done); status != http.StatusOK || done.ExpiresAt == nil {
		t.Fatalf("done: %d %s", status, body)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/kept/update", `{"status":"done"}`, adm, http.StatusOK)
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _, _ := fx.c.do(t, 0, "GET", "/v1/tenants/acme/tasks/r1", nil, adm)
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retained task is still there (%d) long after its period", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fx.mustTask(t, "GET", "/v1/tenants/acme/tasks/kept", "", adm, http.StatusOK)
}
