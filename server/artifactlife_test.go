package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// TestArtifactListDeletePolicyGrants: listing answers only the names a
// principal's grants let it read, page by page; deleting needs a delete
// grant on the name; a policy needs write and delete over its whole
// prefix; a version a ref points at is refused with its ref.
func TestArtifactListDeletePolicyGrants(t *testing.T) {
	fx := newAPIFixture(t)
	c := fx.c
	lister := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"lister","grants":[{"resource":"artifacts","prefix":"team-a","actions":["read"]}]}`)
	deleter := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"deleter","grants":[{"resource":"artifacts","prefix":"team-a","actions":["read","write","delete"]}]}`)
	narrow := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"narrow","grants":[{"resource":"artifacts","prefix":"team-a-x","actions":["read","write","delete"]}]}`)

	content := "some bytes"
	sum := sha256.Sum256([]byte(content))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if status, _, body := c.do(t, 0, "PUT", "/v1/tenants/acme/chunks/"+digest, content, adminAuth()); status != 201 {
		t.Fatalf("chunk upload: %d %s", status, body)
	}
	ids := map[string]string{}
	for i, name := range []string{"team-a-1", "team-a-1", "team-a-2", "team-a-3", "team-b-1"} {
		status, _, body := c.do(t, 0, "POST", "/v1/tenants/acme/artifacts/"+name+"/versions",
			fmt.Sprintf(`{"chunks":[{"digest":%q,"size":%d}],"digest":%q,"size":%d,"media_type":"v%d"}`,
				digest, len(content), digest, len(content), i), adminAuth())
		if status != 201 {
			t.Fatalf("publish %s: %d %s", name, status, body)
		}
		var m struct {
			ArtifactID string `json:"artifact_id"`
			Version    uint64 `json:"version"`
		}
		decodeBody(t, body, &m)
		ids[fmt.Sprintf("%s@%d", name, m.Version)] = m.ArtifactID
	}

	type page struct {
		Artifacts []struct {
			Name          string `json:"name"`
			LatestVersion uint64 `json:"latest_version"`
			Versions      int    `json:"versions"`
		} `json:"artifacts"`
		Next string `json:"next_page_token"`
	}
	list := func(auth map[string]string, query string) (int, page, []byte) {
		t.Helper()
		status, _, body := c.do(t, 0, "GET", "/v1/tenants/acme/artifacts?"+query, nil, auth)
		var p page
		if status == 200 {
			decodeBody(t, body, &p)
		}
		return status, p, body
	}
	// The lister pages through what it may read: team-a only.
	var names []string
	token := ""
	for range 5 {
		status, p, body := list(bearer(lister), "limit=2&page_token="+url.QueryEscape(token))
		if status != 200 {
			t.Fatalf("list: %d %s", status, body)
		}
		for _, a := range p.Artifacts {
			names = append(names, fmt.Sprintf("%s:%d/%d", a.Name, a.LatestVersion, a.Versions))
		}
		if token = p.Next; token == "" {
			break
		}
	}
	if want := []string{"team-a-1:2/2", "team-a-2:1/1", "team-a-3:1/1"}; !slices.Equal(names, want) {
		t.Errorf("lister's pages: %v, want %v", names, want)
	}
	if status, p, _ := list(adminAuth(), "prefix=team-b"); status != 200 || len(p.Artifacts) != 1 || p.Artifacts[0].Name != "team-b-1" {
		t.Errorf("admin list of team-b: %d %+v", status, p)
	}
	if status, _, body := list(bearer(lister), "prefix=team-b"); status != 403 {
		t.Errorf("lister list of team-b: %d %s, want 403", status, body)
	}
	if status, _, body := list(bearer(lister), "page_token=!!"); status != 400 {
		t.Errorf("list with a bad page token: %d %s, want 400", status, body)
	}
	if status, _, body := list(bearer(lister), "prefix=a/b"); status != 400 {
		t.Errorf("list with a prefix no name can have: %d %s, want 400", status, body)
	}

	del := func(auth map[string]string, path string) (int, []byte) {
		t.Helper()
		status, _, body := c.do(t, 0, "DELETE", "/v1/tenants/acme/artifacts/"+path, nil, auth)
		return status, body
	}
	if status, body := del(bearer(lister), "team-a-1/versions/1"); status != 403 {
		t.Errorf("delete without a delete grant: %d %s, want 403", status, body)
	}
	if status, body := del(bearer(deleter), "team-b-1"); status != 403 {
		t.Errorf("delete outside the grant: %d %s, want 403", status, body)
	}
	if status, body := del(bearer(deleter), "team-a-1/versions"); status != http.StatusMethodNotAllowed {
		t.Errorf("DELETE .../versions: %d %s, want 405", status, body)
	}
	if status, body := del(bearer(deleter), "team-a-1/versions/1?expect_version=1"); status != 400 {
		t.Errorf("a version delete with expect_version: %d %s, want 400", status, body)
	}
	if status, _, body := c.do(t, 0, "PUT", "/v1/tenants/acme/refs/keep", `{"artifact_id":"`+ids["team-a-1@1"]+`"}`, adminAuth()); status != 200 {
		t.Fatalf("PUT ref: %d %s", status, body)
	}
	status, body := del(bearer(deleter), "team-a-1/versions/1")
	if status != http.StatusConflict || errorCode(body) != "referenced" {
		t.Fatalf("delete of a referenced version: %d %s, want 409 referenced", status, body)
	}
	var e struct {
		Error struct {
			Refs []string `json:"refs"`
		} `json:"error"`
	}
	decodeBody(t, body, &e)
	if !slices.Equal(e.Error.Refs, []string{"keep"}) {
		t.Errorf("referenced error names refs %v, want [keep]", e.Error.Refs)
	}
	if status, body := del(bearer(deleter), "team-a-1/versions/2"); status != 204 {
		t.Errorf("delete of an unreferenced version: %d %s, want 204", status, body)
	}

	policy := func(auth map[string]string, body string) (int, []byte) {
		t.Helper()
		status, _, resp := c.do(t, 0, "PUT", "/v1/tenants/acme/artifact-policies", body, auth)
		return status, resp
	}
	if status, body := policy(bearer(narrow), `{"prefix":"team-a","keep_last":1}`); status != 403 {
		t.Errorf("policy wider than the grant: %d %s, want 403", status, body)
	}
	if status, body := policy(bearer(lister), `{"prefix":"team-a-x","keep_last":1}`); status != 403 {
		t.Errorf("policy by a reader: %d %s, want 403", status, body)
	}
	if status, body := policy(bearer(deleter), `{"prefix":"","keep_last":1}`); status != 403 {
		t.Errorf("tenant-wide policy by a prefix grant: %d %s, want 403", status, body)
	}
	if status, body := policy(bearer(deleter), `{"prefix":"team-a"}`); status != 400 {
		t.Errorf("policy without keep_last: %d %s, want 400", status, body)
	}
	if status, body := policy(bearer(narrow), `{"prefix":"team-a-x","keep_last":1}`); status != 200 {
		t.Errorf("policy within the grant: %d %s, want 200", status, body)
	}
	if status, body := policy(bearer(deleter), `{"prefix":"team-a","keep_last":2}`); status != 200 {
		t.Errorf("policy within the grant: %d %s, want 200", status, body)
	}
	status, _, body = c.do(t, 0, "GET", "/v1/tenants/acme/artifact-policies", nil, bearer(lister))
	var ps struct {
		Policies []struct {
			Prefix   string `json:"prefix"`
			KeepLast uint64 `json:"keep_last"`
		} `json:"policies"`
	}
	if status != 200 {
		t.Fatalf("GET policies: %d %s", status, body)
	}
	decodeBody(t, body, &ps)
	if len(ps.Policies) != 2 || ps.Policies[0].Prefix != "team-a" || ps.Policies[0].KeepLast != 2 || ps.Policies[1].Prefix != "team-a-x" {
		t.Errorf("policies: %+v", ps.Policies)
	}
	if status, _, body := c.do(t, 0, "GET", "/v1/tenants/acme/artifact-policies", nil, bearer(fx.reader)); status != 403 {
		t.Errorf("policies read by a principal without artifacts grants: %d %s, want 403", status, body)
	}
}
