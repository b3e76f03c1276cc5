package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// cpPath is the path of a thread's checkpoints (or one of them), its thread
// id percent-encoded as one path segment ("." and ".." too, as the SDK
// writes them).
func cpPath(thread, rest string) string {
	th := url.PathEscape(thread)
	if th == "." || th == ".." {
		th = strings.ReplaceAll(th, ".", "%2E")
	}
	return "/v1/tenants/acme/threads/" + th + rest
}

// TestCheckpointThreadIDsAndNamespaces: thread ids of any UTF-8 without
// control characters (e-mail addresses, spaces, slashes, unicode) and
// namespaces (checkpoint_ns) address checkpoints of their own; the default
// namespace answers as before namespaces; bad ids and namespaces are
// invalid_argument, and thread delete takes every namespace.
func TestCheckpointThreadIDsAndNamespaces(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	do := func(method, path string, body any) (int, []byte) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, method, path, body, admin)
		return st, b
	}
	threads := []string{"user@example.com", "with space/and slash", "ünïcødé 🎉", "a", "a/checkpoints", "a/../b", "..", "x//y/"}
	for i, th := range threads {
		if st, b := do("PUT", cpPath(th, "/checkpoints/c1"), fmt.Sprintf(`{"data":%d}`, i)); st != 201 {
			t.Fatalf("PUT to thread %q: %d %s", th, st, b)
		}
		if st, b := do("PUT", cpPath(th, "/checkpoints/c1?checkpoint_ns=sub%3A1%7Cx"), fmt.Sprintf(`{"data":"ns%d"}`, i)); st != 201 {
			t.Fatalf("PUT to thread %q, namespace sub:1|x: %d %s", th, st, b)
		}
	}
	for i, th := range threads {
		var cp map[string]any
		st, b := do("GET", cpPath(th, "/checkpoints/latest"), nil)
		if err := json.Unmarshal(b, &cp); err != nil || st != 200 || cp["thread_id"] != th || cp["data"] != float64(i) {
			t.Errorf("GET latest of %q: %d %s", th, st, b)
		}
		if _, ok := cp["checkpoint_ns"]; ok {
			t.Errorf("a checkpoint of the default namespace has checkpoint_ns: %s", b)
		}
		st, b = do("GET", cpPath(th, "/checkpoints/c1?checkpoint_ns=sub%3A1%7Cx"), nil)
		if err := json.Unmarshal(b, &cp); err != nil || st != 200 || cp["checkpoint_ns"] != "sub:1|x" || cp["data"] != fmt.Sprintf("ns%d", i) {
			t.Errorf("GET c1 of %q in sub:1|x: %d %s", th, st, b)
		}
		if st, b := do("GET", cpPath(th, "/checkpoints?checkpoint_ns=other"), nil); st != 200 || string(b) != `{"checkpoints":[]}`+"\n" {
			t.Errorf("list of an empty namespace of %q: %d %s", th, st, b)
		}
	}

	long := strings.Repeat("x", maxThreadIDBytes+1)
	for _, tc := range []struct{ name, method, path string }{
		{"control character in a thread id", "GET", "/v1/tenants/acme/threads/a%01b/checkpoints/latest"},
		{"invalid UTF-8 in a thread id", "GET", "/v1/tenants/acme/threads/a%FFb/checkpoints/latest"},
		{"an over-long thread id", "GET", cpPath(long, "/checkpoints/latest")},
		{"control character in a namespace", "GET", cpPath("a", "/checkpoints/latest?checkpoint_ns=x%0Ay")},
		{"a namespace given twice", "GET", cpPath("a", "/checkpoints?checkpoint_ns=x&checkpoint_ns=y")},
		{"a namespace on thread delete", "DELETE", cpPath("a", "?checkpoint_ns=sub")},
		{"a thread id of a tab on put", "PUT", "/v1/tenants/acme/threads/%09/checkpoints/c1"},
	} {
		st, b := do(tc.method, tc.path, `{"data":1}`)
		if st != 400 || errorCode(b) != "invalid_argument" {
			t.Errorf("%s: %d %s, want 400 invalid_argument", tc.name, st, b)
		}
	}

	// Deleting "a" leaves "a/checkpoints" (its keys would be under a's,
	// unescaped) and takes a's namespaces.
	if st, b := do("DELETE", cpPath("a", ""), nil); st != 204 {
		t.Fatalf("DELETE thread a: %d %s", st, b)
	}
	for _, path := range []string{cpPath("a", "/checkpoints/c1"), cpPath("a", "/checkpoints/c1?checkpoint_ns=sub%3A1%7Cx")} {
		if st, _ := do("GET", path, nil); st != 404 {
			t.Errorf("GET %s after the thread's delete: %d, want 404", path, st)
		}
	}
	if st, b := do("GET", cpPath("a/checkpoints", "/checkpoints/c1"), nil); st != 200 {
		t.Errorf("thread a/checkpoints after a's delete: %d %s", st, b)
	}
}

// TestCheckpointListFilter: filter is a JSON object matched member by
// member against the metadata, with before and limit counting matches
// only; a malformed filter is refused, never ignored.
func TestCheckpointListFilter(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	parent := ""
	for i := range 6 {
		id := fmt.Sprintf("c%d", i)
		body := fmt.Sprintf(`{"data":%d,"metadata":{"source":%q,"step":%d,"writes":{"n":[%d]}}}`, i, []string{"input", "loop"}[i%2], i, i%3)
		if parent != "" {
			body = fmt.Sprintf(`{"parent_id":%q,%s`, parent, body[1:])
		}
		if st, _, b := fx.c.do(t, 0, "PUT", cpPath("u@example.com", "/checkpoints/"+id), body, admin); st != 201 {
			t.Fatalf("PUT %s: %d %s", id, st, b)
		}
		parent = id
	}
	list := func(query string) (int, string) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, "GET", cpPath("u@example.com", "/checkpoints?"+query), nil, admin)
		if st != 200 {
			return st, errorCode(b)
		}
		var out struct {
			Checkpoints []struct {
				ID string `json:"checkpoint_id"`
			} `json:"checkpoints"`
		}
		decodeBody(t, b, &out)
		var ids []string
		for _, c := range out.Checkpoints {
			ids = append(ids, c.ID)
		}
		return st, strings.Join(ids, ",")
	}
	q := func(filter string) string { return "filter=" + url.QueryEscape(filter) }
	for _, tc := range []struct{ query, want string }{
		{q(`{"source":"loop"}`), "c5,c3,c1"},
		{q(`{"source":"loop"}`) + "&limit=2", "c5,c3"},
		{q(`{"source":"loop"}`) + "&before=c3", "c1"},
		{q(`{"source":"loop","step":3}`), "c3"},
		{q(`{"step":3.0}`), "c3"},
		{q(`{"writes":{"n":[0]}}`), "c3,c0"},
		{q(`{"source":"nope"}`), ""},
		{q(`{"missing":null}`), ""},
		{q(`{}`), "c5,c4,c3,c2,c1,c0"},
	} {
		if st, got := list(tc.query); st != 200 || got != tc.want {
			t.Errorf("list ?%s: %d %q, want %q", tc.query, st, got, tc.want)
		}
	}
	for _, query := range []string{q(`{"source":`), q(`["source"]`), q(`"loop"`), q(`null`), q(`{"a":1,"a":2}`),
		q(`{}`) + "&" + q(`{}`), q(`{"a":"` + strings.Repeat("x", maxCheckpointFilter) + `"}`)} {
		if st, code := list(query); st != 400 || code != "invalid_argument" {
			t.Errorf("list ?%.60s: %d %s, want 400 invalid_argument", query, st, code)
		}
	}
}

// TestCheckpointDataChunks: a checkpoint's data may be held in chunks the
// tenant uploaded (by a principal with a checkpoints write grant only); a
// GET answers it whole, in place of data; lists and the PUT's answer carry
// data_chunks instead. The chunks must be held, be JSON together, fit the
// limit, and be readable by the caller.
func TestCheckpointDataChunks(t *testing.T) {
	fx := newAPIFixture(t)
	writer := bearer(fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"graph","grants":[{"resource":"checkpoints","prefix":"u@","actions":["read","write"]}]}`))
	upload := func(auth map[string]string, content string) string {
		t.Helper()
		d := digestOf([]byte(content))
		if st, _, b := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/chunks/"+d, content, auth); st != 201 && st != 200 {
			t.Fatalf("chunk upload: %d %s", st, b)
		}
		return d
	}
	parts := []string{`{"messages":["` + strings.Repeat("a", 3000), strings.Repeat("b", 2000) + `"],"n":1}`}
	d0, d1 := upload(writer, parts[0]), upload(writer, parts[1])
	chunks := fmt.Sprintf(`[{"digest":%q,"size":%d},{"digest":%q,"size":%d}]`, d0, len(parts[0]), d1, len(parts[1]))
	put := func(auth map[string]string, thread, id, body string) (int, []byte) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, "PUT", cpPath(thread, "/checkpoints/"+id), body, auth)
		return st, b
	}
	st, b := put(writer, "u@example.com", "c1", `{"data_chunks":`+chunks+`,"metadata":{"big":true}}`)
	var answer map[string]any
	if err := json.Unmarshal(b, &answer); err != nil || st != 201 || answer["data"] != nil || len(answer["data_chunks"].([]any)) != 2 {
		t.Fatalf("PUT with data_chunks: %d %s", st, b)
	}
	if st, b := put(writer, "u@example.com", "c1", `{"data_chunks":`+chunks+`,"metadata":{"big":true}}`); st != 200 {
		t.Errorf("retried PUT with data_chunks: %d %s, want 200", st, b)
	}
	st, _, b = fx.c.do(t, 0, "GET", cpPath("u@example.com", "/checkpoints/c1"), nil, writer)
	var got struct {
		Data       json.RawMessage `json:"data"`
		DataChunks []any           `json:"data_chunks"`
		Metadata   map[string]any  `json:"metadata"`
	}
	if err := json.Unmarshal(b, &got); err != nil || st != 200 || string(got.Data) != parts[0]+parts[1] ||
		len(got.DataChunks) != 2 || got.Metadata["big"] != true {
		t.Fatalf("GET a chunked checkpoint: %d %v %.200s", st, err, b)
	}
	st, _, b = fx.c.do(t, 0, "GET", cpPath("u@example.com", "/checkpoints"), nil, writer)
	if st != 200 || !strings.Contains(string(b), `"data":null`) || !strings.Contains(string(b), d1) {
		t.Errorf("list with a chunked checkpoint: %d %.300s", st, b)
	}

	notJSON := upload(writer, `{"unterminated":`)
	secret := upload(adminAuth(), "the launch codes")
	if st, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/artifacts/secret/versions",
		fmt.Sprintf(`{"chunks":[{"digest":%q,"size":16}],"digest":%q,"size":16}`, secret, secret), adminAuth()); st != 201 {
		t.Fatalf("publish secret: %d %s", st, b)
	}
	missing := digestOf([]byte("never uploaded"))
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"data and data_chunks", `{"data":1,"data_chunks":` + chunks + `}`, 400, "invalid_argument"},
		{"no chunks", `{"data_chunks":[]}`, 400, "invalid_argument"},
		{"a bad digest", `{"data_chunks":[{"digest":"sha256:xyz","size":1}]}`, 400, "invalid_argument"},
		{"an empty chunk", fmt.Sprintf(`{"data_chunks":[{"digest":%q,"size":0}]}`, d0), 400, "invalid_argument"},
		{"over the limit", fmt.Sprintf(`{"data_chunks":[%s]}`, strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{"digest":%q,"size":4194304},`, d0), 5), ",")), 413, "too_large"},
		{"a chunk not held", fmt.Sprintf(`{"data_chunks":[{"digest":%q,"size":5}]}`, missing), 400, "missing_chunks"},
		{"content that is not JSON", fmt.Sprintf(`{"data_chunks":[{"digest":%q,"size":16}]}`, notJSON), 400, "invalid_argument"},
		{"a chunk of an artifact it may not read", fmt.Sprintf(`{"data_chunks":[{"digest":%q,"size":16}]}`, secret), 403, "forbidden"},
	} {
		st, b := put(writer, "u@example.com", "c9", tc.body)
		if st != tc.status || errorCode(b) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, st, b, tc.status, tc.code)
		}
	}
	// Each chunk read must be the size the request gives it: a chunk named
	// many times with a size of 1 stops at the first (before, all were read
	// and joined, so 1,024 names of one 4 MiB chunk read 4 GiB).
	pair := upload(writer, `{}`)
	thrice := fmt.Sprintf(`{"data_chunks":[%s]}`, strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{"digest":%q,"size":1},`, pair), 3), ","))
	if st, b := put(writer, "u@example.com", "c9", thrice); st != 400 || !strings.Contains(string(b), "data_chunks[0] has size 1, the chunk holds 2 bytes") {
		t.Errorf("a chunk named with the wrong size: %d %s, want 400 naming data_chunks[0]'s size", st, b)
	}
	// The next checkpoint may name its parent's chunks again.
	if st, b := put(writer, "u@example.com", "c2", `{"parent_id":"c1","data_chunks":`+chunks+`}`); st != 201 {
		t.Errorf("a child naming its parent's chunks: %d %s", st, b)
	}
	if st, b := put(bearer(fx.reader), "u@example.com", "c3", `{"parent_id":"c2","data":1}`); st != http.StatusForbidden {
		t.Errorf("a put without a checkpoints grant: %d %s", st, b)
	}
}

// TestCheckpointPendingWritesByIndex: pending writes over HTTP, as
// LangGraph's put_writes keeps them: a second call for a task adds to its
// writes (an interrupt, then a resume under the same task id), a recorded
// index >= 0 stays, a negative one is replaced; a checkpoint answers them
// by task id, then index, with task_path; a list carries them when asked
// (pending_writes=true), and before an unknown checkpoint is an empty
// page, as LangGraph's list(before=) of one.
func TestCheckpointPendingWritesByIndex(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	do := func(method, path string, body any) (int, []byte) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, method, path, body, admin)
		return st, b
	}
	if st, b := do("PUT", cpPath("th", "/checkpoints/c1"), `{"data":1}`); st != 201 {
		t.Fatalf("put c1: %d %s", st, b)
	}
	if st, b := do("PUT", cpPath("th", "/checkpoints/c2"), `{"parent_id":"c1","data":2}`); st != 201 {
		t.Fatalf("put c2: %d %s", st, b)
	}
	writes := cpPath("th", "/checkpoints/c1/writes/")
	for _, tc := range []struct {
		task, body string
		status     int
	}{
		{"node-a", `{"writes":[{"channel":"messages","value":"hi"},{"channel":"count","value":1}],"task_path":"~__pregel_pull, node-a"}`, 201},
		{"node-a", `{"writes":[{"channel":"messages","value":"hi"},{"channel":"count","value":1}],"task_path":"~__pregel_pull, node-a"}`, 200},
		{"node-a", `{"writes":[{"channel":"messages","value":"changed"}],"task_path":"~__pregel_pull, node-a"}`, 200},
		{"node-b", `{"writes":[{"channel":"__interrupt__","value":{"ask":"approve?"},"idx":-3}]}`, 201},
		{"node-b", `{"writes":[{"channel":"__resume__","value":"yes","idx":-4}]}`, 201},
		{"node-b", `{"writes":[{"channel":"__resume__","value":"no","idx":-4}]}`, 201},
		{"node-b", `{"writes":[{"channel":"__resume__","value":"no","idx":-4}]}`, 200},
	} {
		if st, b := do("PUT", writes+tc.task, tc.body); st != tc.status {
			t.Errorf("PUT writes of %s %s: %d %s, want %d", tc.task, tc.body, st, b, tc.status)
		}
	}
	want := `[{"task_id":"node-a","task_path":"~__pregel_pull, node-a","idx":0,"channel":"messages","value":"hi"},` +
		`{"task_id":"node-a","task_path":"~__pregel_pull, node-a","idx":1,"channel":"count","value":1},` +
		`{"task_id":"node-b","idx":-4,"channel":"__resume__","value":"no"},` +
		`{"task_id":"node-b","idx":-3,"channel":"__interrupt__","value":{"ask":"approve?"}}]`
	var cp struct {
		Pending json.RawMessage `json:"pending_writes"`
	}
	st, b := do("GET", cpPath("th", "/checkpoints/c1"), nil)
	if err := json.Unmarshal(b, &cp); err != nil || st != 200 || string(cp.Pending) != want {
		t.Errorf("GET c1: %d pending_writes %s\nwant %s", st, cp.Pending, want)
	}
	var list struct {
		Checkpoints []struct {
			ID      string          `json:"checkpoint_id"`
			Pending json.RawMessage `json:"pending_writes"`
		} `json:"checkpoints"`
	}
	st, b = do("GET", cpPath("th", "/checkpoints?pending_writes=true"), nil)
	if err := json.Unmarshal(b, &list); err != nil || st != 200 || len(list.Checkpoints) != 2 || list.Checkpoints[0].Pending != nil || string(list.Checkpoints[1].Pending) != want {
		t.Errorf("list with pending_writes=true: %d %s", st, b)
	}
	st, b = do("GET", cpPath("th", "/checkpoints"), nil)
	if st != 200 || strings.Contains(string(b), "pending_writes") {
		t.Errorf("list without pending_writes: %d %s, want no pending writes", st, b)
	}
	if st, b := do("GET", cpPath("th", "/checkpoints?before=nope"), nil); st != 200 || string(b) != `{"checkpoints":[]}`+"\n" {
		t.Errorf("list before an unknown checkpoint: %d %s, want an empty page", st, b)
	}
	for _, tc := range []struct{ name, path, body string }{
		{"writes not an array", writes + "t", `{"writes":{"channel":"a","value":1}}`},
		{"old form: bare values", writes + "t", `{"writes":[["messages","hi"]]}`},
		{"no channel", writes + "t", `{"writes":[{"value":1}]}`},
		{"no value", writes + "t", `{"writes":[{"channel":"a"}]}`},
		{"unknown member", writes + "t", `{"writes":[{"channel":"a","value":1,"type":"json"}]}`},
		{"index out of range", writes + "t", `{"writes":[{"channel":"a","value":1,"idx":4294967296}]}`},
		{"control character in a channel", writes + "t", `{"writes":[{"channel":"a\u0001","value":1}]}`},
		{"no writes", writes + "t", `{}`},
		{"pending_writes not a boolean", cpPath("th", "/checkpoints?pending_writes=yes"), ``},
	} {
		method := "PUT"
		if tc.body == "" {
			method = "GET"
		}
		if st, b := do(method, tc.path, tc.body); st != 400 || errorCode(b) != "invalid_argument" {
			t.Errorf("%s: %d %s, want 400 invalid_argument", tc.name, st, b)
		}
	}
	// Nothing was written by the refused requests.
	if st, b := do("GET", cpPath("th", "/checkpoints/c1"), nil); st != 200 || strings.Contains(string(b), `"task_id":"t"`) {
		t.Errorf("refused writes left a trace: %s", b)
	}
}

// TestThreadLifecycleRoutes: copy (read on the thread, write on the
// target), prune (delete on each thread) and delete-runs (delete on every
// thread) over HTTP, with their bounds; a refused request writes nothing.
func TestThreadLifecycleRoutes(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	narrow := bearer(fx.createPrincipal(t, admin, "acme",
		`{"name":"narrow","grants":[{"resource":"checkpoints","prefix":"mine/","actions":["read","write","delete"]}]}`))
	do := func(auth map[string]string, method, path string, body any) (int, string) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, method, path, body, auth)
		return st, string(b)
	}
	put := func(thread, id, parent, run string) {
		t.Helper()
		body := fmt.Sprintf(`{"data":%q,"metadata":{"run_id":%q}}`, id, run)
		if parent != "" {
			body = fmt.Sprintf(`{"parent_id":%q,"data":%q,"metadata":{"run_id":%q}}`, parent, id, run)
		}
		if st, b := do(admin, "PUT", cpPath(thread, "/checkpoints/"+id), body); st != 201 {
			t.Fatalf("put %s/%s: %d %s", thread, id, st, b)
		}
	}
	put("mine/a", "c1", "", "r1")
	put("mine/a", "c2", "c1", "r2")
	put("mine/a", "c3", "c2", "r1")
	put("other", "o1", "", "r1")

	for _, tc := range []struct {
		name, method, path, body string
		auth                     map[string]string
		status                   int
		want                     string
	}{
		{"copy outside the target's grant", "POST", cpPath("mine/a", "/copy"), `{"target":"other2"}`, narrow, 403, "forbidden"},
		{"copy of a thread outside the grant", "POST", cpPath("other", "/copy"), `{"target":"mine/b"}`, narrow, 403, "forbidden"},
		{"copy without a target", "POST", cpPath("mine/a", "/copy"), `{}`, narrow, 400, "invalid_argument"},
		{"copy onto a thread with checkpoints", "POST", cpPath("mine/a", "/copy"), `{"target":"other"}`, admin, 409, "already_exists"},
		{"copy of a missing thread", "POST", cpPath("mine/none", "/copy"), `{"target":"mine/z"}`, narrow, 404, "not_found"},
		{"copy", "POST", cpPath("mine/a", "/copy"), `{"target":"mine/b"}`, narrow, 200, `{"checkpoints":3,"source":"mine/a","target":"mine/b"}`},
		{"prune outside the grant", "POST", "/v1/tenants/acme/checkpoints/prune", `{"threads":["mine/a","other"],"strategy":"keep_latest"}`, narrow, 403, "forbidden"},
		{"prune with another strategy", "POST", "/v1/tenants/acme/checkpoints/prune", `{"threads":["mine/a"],"strategy":"keep_first"}`, narrow, 400, "invalid_argument"},
		{"prune of too many threads", "POST", "/v1/tenants/acme/checkpoints/prune", `{"threads":[` + strings.Repeat(`"mine/x",`, 100) + `"mine/x"],"strategy":"delete"}`, narrow, 400, "invalid_argument"},
		{"prune", "POST", "/v1/tenants/acme/checkpoints/prune", `{"threads":["mine/b","mine/none"],"strategy":"keep_latest"}`, narrow, 200, `{"deleted":2}`},
		{"delete-runs without a grant on every thread", "POST", "/v1/tenants/acme/checkpoints/delete-runs", `{"run_ids":["r1"]}`, narrow, 403, "forbidden"},
		{"delete-runs with an empty id", "POST", "/v1/tenants/acme/checkpoints/delete-runs", `{"run_ids":[""]}`, admin, 400, "invalid_argument"},
		{"delete-runs", "POST", "/v1/tenants/acme/checkpoints/delete-runs", `{"run_ids":["r1"]}`, admin, 200, `{"deleted":4}`},
	} {
		st, b := do(tc.auth, tc.method, tc.path, tc.body)
		if st != tc.status || (st == 200 && strings.TrimSpace(b) != tc.want) || (st != 200 && errorCode([]byte(b)) != tc.want) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, st, b, tc.status, tc.want)
		}
	}
	// r1 was c1 and c3 of mine/a, o1 of other, and c3 of mine/b (its c1
	// was pruned): mine/a keeps c2, now its head, and other has none.
	for _, tc := range []struct{ thread, head string }{{"mine/a", "c2"}, {"other", ""}, {"mine/b", ""}} {
		st, b := do(admin, "GET", cpPath(tc.thread, "/checkpoints/latest"), nil)
		switch {
		case tc.head == "" && st != 404:
			t.Errorf("head of %s: %d %s, want none", tc.thread, st, b)
		case tc.head != "" && (st != 200 || !strings.Contains(b, `"checkpoint_id":"`+tc.head+`"`)):
			t.Errorf("head of %s: %d %s, want %s", tc.thread, st, b, tc.head)
		}
	}
}

// TestCheckpointPolicies: a keep_last policy trims a namespace as puts
// come; a max_age policy's checkpoints are purged by the leader once
// their time has passed; setting a policy needs write and delete on every
// thread under its prefix, and is validated.
func TestCheckpointPolicies(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	narrow := bearer(fx.createPrincipal(t, admin, "acme",
		`{"name":"narrow","grants":[{"resource":"checkpoints","prefix":"mine/","actions":["read","write","delete"]}]}`))
	reader := bearer(fx.createPrincipal(t, admin, "acme",
		`{"name":"cp-reader","grants":[{"resource":"checkpoints","prefix":"","actions":["read"]}]}`))
	do := func(auth map[string]string, method, path string, body any) (int, string) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, method, path, body, auth)
		return st, string(b)
	}
	const pol = "/v1/tenants/acme/checkpoint-policies"
	for _, tc := range []struct {
		name   string
		auth   map[string]string
		body   string
		status int
	}{
		{"outside the grant", narrow, `{"prefix":"","keep_last":2}`, 403},
		{"no delete grant", reader, `{"prefix":"mine/","keep_last":2}`, 403},
		{"no prefix", narrow, `{"keep_last":2}`, 400},
		{"keep_last too large", narrow, `{"prefix":"mine/","keep_last":100001}`, 400},
		{"negative max age", narrow, `{"prefix":"mine/","max_age_ms":-1}`, 400},
		{"keep last 2 under mine/", narrow, `{"prefix":"mine/","keep_last":2}`, 200},
		{"max age under tmp/", admin, `{"prefix":"tmp/","max_age_ms":300}`, 200},
	} {
		if st, b := do(tc.auth, "PUT", pol, tc.body); st != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, st, b, tc.status)
		}
	}
	if st, b := do(reader, "GET", pol, nil); st != 200 || !strings.Contains(b, `{"prefix":"mine/","keep_last":2,"max_age_ms":0}`) {
		t.Errorf("list of policies: %d %s", st, b)
	}
	parent := ""
	for _, id := range []string{"c1", "c2", "c3"} {
		body := `{"data":1}`
		if parent != "" {
			body = fmt.Sprintf(`{"parent_id":%q,"data":1}`, parent)
		}
		if st, b := do(narrow, "PUT", cpPath("mine/a", "/checkpoints/"+id), body); st != 201 {
			t.Fatalf("put %s: %d %s", id, st, b)
		}
		parent = id
	}
	if st, b := do(admin, "GET", cpPath("mine/a", "/checkpoints"), nil); st != 200 || strings.Contains(b, `"checkpoint_id":"c1"`) || !strings.Contains(b, `"checkpoint_id":"c3"`) {
		t.Errorf("mine/a under keep_last 2: %d %s, want c3 and c2", st, b)
	}
	if st, b := do(admin, "PUT", cpPath("tmp/x", "/checkpoints/c1"), `{"data":1}`); st != 201 || !strings.Contains(b, `"expires_at"`) {
		t.Fatalf("put under max age: %d %s", st, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := do(admin, "GET", cpPath("tmp/x", "/checkpoints/latest"), nil)
		if st == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tmp/x's checkpoint still there 10 s after its 300 ms max age: %d", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTenantCheckpointList: GET /v1/tenants/{t}/checkpoints lists across
// threads and namespaces, as LangGraph's list with no thread_id or no
// checkpoint_ns: by thread, then namespace, newest first; thread and
// checkpoint_ns (present, even empty) narrow it; before_id compares ids;
// a principal sees the threads it may read only; pages follow tokens.
func TestTenantCheckpointList(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	narrow := bearer(fx.createPrincipal(t, admin, "acme",
		`{"name":"lister","grants":[{"resource":"checkpoints","prefix":"mine/","actions":["read"]}]}`))
	kvOnly := bearer(fx.createPrincipal(t, admin, "acme",
		`{"name":"kv-only","grants":[{"resource":"kv","prefix":"","actions":["read"]}]}`))
	put := func(thread, ns, id, parent string) {
		t.Helper()
		body := fmt.Sprintf(`{"data":%q,"metadata":{"source":%q}}`, id, map[bool]string{true: "input", false: "loop"}[parent == ""])
		if parent != "" {
			body = fmt.Sprintf(`{"parent_id":%q,"data":%q,"metadata":{"source":"loop"}}`, parent, id)
		}
		path := cpPath(thread, "/checkpoints/"+id)
		if ns != "" {
			path += "?checkpoint_ns=" + url.QueryEscape(ns)
		}
		if st, _, b := fx.c.do(t, 0, "PUT", path, body, admin); st != 201 {
			t.Fatalf("put %s/%s/%s: %d %s", thread, ns, id, st, b)
		}
	}
	put("mine/a", "", "1a", "")
	put("mine/a", "", "1b", "1a")
	put("mine/a", "child", "1c", "")
	put("other", "", "2a", "")
	put("mine/b", "", "3a", "")
	if st, _, b := fx.c.do(t, 0, "PUT", cpPath("mine/a", "/checkpoints/1b/writes/t"), `{"writes":[{"channel":"c","value":1}]}`, admin); st != 201 {
		t.Fatalf("writes: %d %s", st, b)
	}
	list := func(auth map[string]string, query string) (int, string, string) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, "GET", "/v1/tenants/acme/checkpoints?"+query, nil, auth)
		if st != 200 {
			return st, errorCode(b), ""
		}
		var out struct {
			Checkpoints []struct {
				Thread  string            `json:"thread_id"`
				NS      string            `json:"checkpoint_ns"`
				ID      string            `json:"checkpoint_id"`
				Pending []json.RawMessage `json:"pending_writes"`
			} `json:"checkpoints"`
			Next string `json:"next_page_token"`
		}
		decodeBody(t, b, &out)
		var got []string
		for _, c := range out.Checkpoints {
			s := c.Thread + "|" + c.NS + "|" + c.ID
			if len(c.Pending) > 0 {
				s += fmt.Sprintf("+%dw", len(c.Pending))
			}
			got = append(got, s)
		}
		return st, strings.Join(got, ","), out.Next
	}
	for _, tc := range []struct {
		name  string
		auth  map[string]string
		query string
		want  string
	}{
		{"every thread and namespace", admin, "", "mine/a|child|1c,mine/a||1b,mine/a||1a,mine/b||3a,other||2a"},
		{"the default namespace only", admin, "checkpoint_ns=", "mine/a||1b,mine/a||1a,mine/b||3a,other||2a"},
		{"one namespace", admin, "checkpoint_ns=child", "mine/a|child|1c"},
		{"one thread, every namespace", admin, "thread=mine%2Fa", "mine/a|child|1c,mine/a||1b,mine/a||1a"},
		{"ids before 2", admin, "before_id=2", "mine/a|child|1c,mine/a||1b,mine/a||1a"},
		{"a filter", admin, "filter=" + url.QueryEscape(`{"source":"input"}`), "mine/a|child|1c,mine/a||1a,mine/b||3a,other||2a"},
		{"with pending writes", admin, "thread=mine%2Fa&checkpoint_ns=&pending_writes=true", "mine/a||1b+1w,mine/a||1a"},
		{"the caller's threads only", narrow, "", "mine/a|child|1c,mine/a||1b,mine/a||1a,mine/b||3a"},
		{"a thread outside the grant", narrow, "thread=other", "forbidden"},
		{"no checkpoints grant", kvOnly, "", "forbidden"},
		{"a bad before_id", admin, "before_id=a%2Fb", "invalid_argument"},
		{"a forged page token", admin, "page_token=" + base64.RawURLEncoding.EncodeToString([]byte("t/other/th/x")), "invalid_argument"},
	} {
		if _, got, _ := list(tc.auth, tc.query); got != tc.want {
			t.Errorf("%s (?%s): got %q, want %q", tc.name, tc.query, got, tc.want)
		}
	}
	// Pages of one, following the tokens, give the whole list.
	var all []string
	token := ""
	for range 20 {
		q := "limit=1"
		if token != "" {
			q += "&page_token=" + token
		}
		_, got, next := list(admin, q)
		if got != "" {
			all = append(all, got)
		}
		if token = next; token == "" {
			break
		}
	}
	if got := strings.Join(all, ","); got != "mine/a|child|1c,mine/a||1b,mine/a||1a,mine/b||3a,other||2a" {
		t.Errorf("pages of one: %q", got)
	}
}

// TestCheckpointBlobsHTTP: channel values by version over HTTP: a put
// brings its new values and names the rest; a GET and a list answer them
// joined; a value named but never stored, or stored but not named, is
// refused.
func TestCheckpointBlobsHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	do := func(method, path string, body any) (int, string) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, method, path, body, admin)
		return st, string(b)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	if st, b := do("PUT", cpPath("th", "/checkpoints/c1"), fmt.Sprintf(`{"data":{"v":1},"blob_versions":{"m":"1","a":"1"},
		"blobs":[{"channel":"m","version":"1","type":"msgpack","b64":%q},{"channel":"a","version":"1","type":"json","b64":%q}]}`, b64("\x91\xa1x"), b64(`"a"`))); st != 201 {
		t.Fatalf("put c1: %d %s", st, b)
	}
	if st, b := do("PUT", cpPath("th", "/checkpoints/c2"), fmt.Sprintf(`{"parent_id":"c1","data":{"v":1},"blob_versions":{"m":"2","a":"1"},
		"blobs":[{"channel":"m","version":"2","type":"msgpack","b64":%q}]}`, b64("\x92\xa1x\xa1y"))); st != 201 {
		t.Fatalf("put c2: %d %s", st, b)
	}
	want := fmt.Sprintf(`"blobs":[{"channel":"a","version":"1","type":"json","b64":%q},{"channel":"m","version":"2","type":"msgpack","b64":%q}]`, b64(`"a"`), b64("\x92\xa1x\xa1y"))
	if st, b := do("GET", cpPath("th", "/checkpoints/c2"), nil); st != 200 || !strings.Contains(b, want) {
		t.Errorf("GET c2: %d %s\nwant %s", st, b, want)
	}
	if st, b := do("GET", cpPath("th", "/checkpoints?limit=1"), nil); st != 200 || !strings.Contains(b, want) {
		t.Errorf("list: %d %s\nwant %s", st, b, want)
	}
	for _, tc := range []struct{ name, body, code string }{
		{"a value never stored", `{"parent_id":"c2","data":1,"blob_versions":{"m":"9"}}`, "invalid_argument"},
		{"a value not named", fmt.Sprintf(`{"parent_id":"c2","data":1,"blob_versions":{"m":"2"},"blobs":[{"channel":"z","version":"1","type":"json","b64":%q}]}`, b64("1")), "invalid_argument"},
		{"no type", fmt.Sprintf(`{"parent_id":"c2","data":1,"blob_versions":{"z":"1"},"blobs":[{"channel":"z","version":"1","b64":%q}]}`, b64("1")), "invalid_argument"},
		{"bad base64", `{"parent_id":"c2","data":1,"blob_versions":{"z":"1"},"blobs":[{"channel":"z","version":"1","type":"json","b64":"!!"}]}`, "invalid_argument"},
	} {
		if st, b := do("PUT", cpPath("th", "/checkpoints/c3"), tc.body); errorCode([]byte(b)) != tc.code {
			t.Errorf("%s: %d %s, want %s", tc.name, st, b, tc.code)
		}
	}
	if st, b := do("GET", cpPath("th", "/checkpoints/missing-blobs-probe"), nil); st != 404 {
		t.Errorf("probe: %d %s", st, b)
	}
	st, b := do("PUT", cpPath("th", "/checkpoints/c3"), `{"parent_id":"c2","data":1,"blob_versions":{"m":"9"}}`)
	if st != 400 || !strings.Contains(b, `"missing_blobs":["m@9"]`) {
		t.Errorf("a value never stored: %d %s, want missing_blobs", st, b)
	}
}
