package server

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestThreadDeleteRetryKeepsNewThread: a thread delete is one command, so
// the same DELETE again under its Idempotency-Key replays the first answer
// and deletes nothing more: checkpoints written in the thread since stay.
// (A delete in several commands, whose retry carried on with fresh ones,
// deleted them.)
func TestThreadDeleteRetryKeepsNewThread(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	parent := ""
	for i := range 10 {
		id := fmt.Sprintf("c%d", i)
		body := `{"data":1}`
		if parent != "" {
			body = fmt.Sprintf(`{"parent_id":%q,"data":1}`, parent)
		}
		for _, ns := range []string{"", "?checkpoint_ns=sub"} {
			if st, _, b := fx.c.do(t, 0, "PUT", cpPath("big", "/checkpoints/"+id+ns), body, admin); st != 201 {
				t.Fatalf("PUT %s%s: %d %s", id, ns, st, b)
			}
		}
		parent = id
	}
	key := with(admin, "Idempotency-Key", "del-big")
	if st, _, b := fx.c.do(t, 0, "DELETE", cpPath("big", ""), nil, key); st != 204 {
		t.Fatalf("DELETE: %d %s", st, b)
	}
	for _, ns := range []string{"", "?checkpoint_ns=sub"} {
		if st, _, b := fx.c.do(t, 0, "GET", cpPath("big", "/checkpoints/latest"+ns), nil, admin); st != 404 {
			t.Errorf("GET latest%s after the delete: %d %s", ns, st, b)
		}
	}
	if st, _, b := fx.c.do(t, 0, "PUT", cpPath("big", "/checkpoints/fresh"), `{"data":2}`, admin); st != 201 {
		t.Fatalf("PUT fresh: %d %s", st, b)
	}
	if st, h, b := fx.c.do(t, 0, "DELETE", cpPath("big", ""), nil, key); st != 204 || h.Get("Idempotent-Replay") != "true" {
		t.Errorf("the DELETE again under its Idempotency-Key: %d (replay %q) %s, want a replayed 204", st, h.Get("Idempotent-Replay"), b)
	}
	if st, _, b := fx.c.do(t, 0, "GET", cpPath("big", "/checkpoints/fresh"), nil, admin); st != 200 {
		t.Errorf("the checkpoint written after the delete, after its retry: %d %s, want 200", st, b)
	}
}

// TestCheckpointListPageToken: a page that ends at its limit with more to
// come has a next_page_token, which continues the list as before= would;
// the last page has none; page_token and before together are refused.
func TestCheckpointListPageToken(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	parent := ""
	for i := range 5 {
		id := fmt.Sprintf("c%d", i)
		body := `{"data":1}`
		if parent != "" {
			body = fmt.Sprintf(`{"parent_id":%q,"data":1}`, parent)
		}
		if st, _, b := fx.c.do(t, 0, "PUT", cpPath("t", "/checkpoints/"+id), body, admin); st != 201 {
			t.Fatalf("PUT %s: %d %s", id, st, b)
		}
		parent = id
	}
	var ids []string
	query := "limit=2"
	for pages := 0; ; pages++ {
		st, _, b := fx.c.do(t, 0, "GET", cpPath("t", "/checkpoints?"+query), nil, admin)
		if st != 200 || pages > 5 {
			t.Fatalf("GET ?%s: %d %s", query, st, b)
		}
		var out struct {
			Checkpoints []struct {
				ID string `json:"checkpoint_id"`
			} `json:"checkpoints"`
			Next *string `json:"next_page_token"`
		}
		decodeBody(t, b, &out)
		for _, c := range out.Checkpoints {
			ids = append(ids, c.ID)
		}
		if out.Next == nil {
			break
		}
		query = "limit=2&page_token=" + url.QueryEscape(*out.Next)
	}
	if got := strings.Join(ids, ","); got != "c4,c3,c2,c1,c0" {
		t.Errorf("pages: %s", got)
	}
	for _, q := range []string{"page_token=%21%21", "before=c3&page_token=YzI"} {
		if st, _, b := fx.c.do(t, 0, "GET", cpPath("t", "/checkpoints?"+q), nil, admin); st != 400 || errorCode(b) != "invalid_argument" {
			t.Errorf("GET ?%s: %d %s, want 400", q, st, b)
		}
	}
}
