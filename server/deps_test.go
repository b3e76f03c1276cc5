package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTaskDependenciesHTTP: depends_on keeps a task off claims until its
// dependencies are done, its claim carries their results, GET
// .../dependencies lists them, bad dependencies are 400 and write nothing,
// and a fan-out larger than the resolving command's budget is resolved by
// the leader's task.resolve_deps.
func TestTaskDependenciesHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	for _, id := range []string{"a", "b"} {
		fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"`+id+`","queue":"up"}`, adm, http.StatusCreated)
	}
	for body, msg := range map[string]string{
		`{"task_id":"c","queue":"down","depends_on":["a","nope"]}`:                      `depends_on names task \"nope\", which does not exist`,
		`{"task_id":"c","queue":"down","depends_on":["c"]}`:                             "may not depend on itself",
		`{"task_id":"c","queue":"down","depends_on":["a","a"]}`:                         "twice",
		`{"task_id":"c","queue":"down","depends_on":["a"],"dependency_policy":"maybe"}`: "must be fail, cancel or ignore",
		`{"task_id":"c","queue":"down","depends_on":["a/b"]}`:                           "depends_on[]",
	} {
		status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", body, adm)
		if status != http.StatusBadRequest || !strings.Contains(string(resp), msg) {
			t.Errorf("%s: %d %s, want 400 with %q", body, status, resp, msg)
		}
	}
	fx.mustTask(t, "GET", "/v1/tenants/acme/tasks/c", "", adm, http.StatusNotFound)

	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"c","queue":"down","depends_on":["a","b"]}`, adm, http.StatusCreated)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/c/claim", `{"owner":"w","lease_ms":1000}`, adm, http.StatusConflict)
	fx.mustTask(t, "POST", "/v1/tenants/acme/queues/down/claim", `{"owner":"w","lease_ms":1000}`, adm, http.StatusNoContent)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/a/update", `{"status":"done","result":{"n":1}}`, adm, http.StatusOK)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/b/update", `{"status":"done","result":{"n":2}}`, adm, http.StatusOK)
	status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/down/claim", `{"owner":"w","lease_ms":10000}`, adm)
	var claimed struct {
		TaskID string `json:"task_id"`
		Left   uint64 `json:"dependencies_left"`
		Deps   []struct {
			TaskID string          `json:"task_id"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		} `json:"dependencies"`
	}
	if status != http.StatusOK {
		t.Fatalf("queue claim once the dependencies are done: %d %s", status, resp)
	}
	decodeBody(t, resp, &claimed)
	if claimed.TaskID != "c" || len(claimed.Deps) != 2 || string(claimed.Deps[1].Result) != `{"n":2}` || claimed.Deps[0].Status != "done" {
		t.Fatalf("claim answer: %s", resp)
	}
	var list struct {
		Deps []struct {
			TaskID string `json:"task_id"`
		} `json:"dependencies"`
		Next string `json:"next_page_token"`
	}
	fx.get(t, "/v1/tenants/acme/tasks/c/dependencies?limit=1", adm, http.StatusOK, &list)
	if len(list.Deps) != 1 || list.Deps[0].TaskID != "a" || list.Next == "" {
		t.Fatalf("first page: %+v", list)
	}
	fx.get(t, "/v1/tenants/acme/tasks/c/dependencies?limit=1&page_token="+list.Next, adm, http.StatusOK, &list)
	if len(list.Deps) != 1 || list.Deps[0].TaskID != "b" || list.Next != "" {
		t.Fatalf("second page: %+v", list)
	}
	fx.get(t, "/v1/tenants/acme/tasks/c/dependencies", bearer(fx.reader), http.StatusForbidden, nil)

	// A fan-out past what one command resolves: the leader's loop does the rest.
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"root","queue":"up"}`, adm, http.StatusCreated)
	const n = 300
	for i := range n {
		fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", fmt.Sprintf(`{"task_id":"kid-%d","queue":"fan","depends_on":["root"]}`, i), adm, http.StatusCreated)
	}
	var stats struct {
		Blocked int64 `json:"blocked"`
		Waiting int64 `json:"waiting"`
	}
	fx.get(t, "/v1/tenants/acme/queues/fan", adm, http.StatusOK, &stats)
	if stats.Blocked != n || stats.Waiting != 0 {
		t.Fatalf("before the root is done: %+v", stats)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/root/update", `{"status":"done"}`, adm, http.StatusOK)
	waitFor(t, "every child to be claimable", func() string {
		fx.get(t, "/v1/tenants/acme/queues/fan", adm, http.StatusOK, &stats)
		if stats.Blocked != 0 || stats.Waiting != n {
			return fmt.Sprintf("%+v", stats)
		}
		return ""
	})
}
