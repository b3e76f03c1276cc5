package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestArtifactNameWithSlash: a name holding "/" on a versions route (or a
// whole artifact's delete) is 400 invalid_argument naming the grammar,
// not 404 "no such endpoint".
func TestArtifactNameWithSlash(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s, want 201", status, body)
	}
	base := "/v1/tenants/acme/artifacts/"
	cases := []struct {
		method, path string
		body         any
	}{
		{"POST", base + "out/x/versions", `{"chunks":[],"size":0,"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`},
		{"POST", base + "out%2Fx/versions", `{"chunks":[],"size":0,"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`},
		{"GET", base + "out/x/versions", nil},
		{"GET", base + "a/b/c/versions/1", nil},
		{"GET", base + "out/x/versions/1/content", nil},
		{"DELETE", base + "out/x/versions/1", nil},
		{"DELETE", base + "out/x", nil},
	}
	for _, tc := range cases {
		status, _, body := c.do(t, leader, tc.method, tc.path, tc.body, adminAuth())
		if status != http.StatusBadRequest || errorCode(body) != "invalid_argument" || !strings.Contains(string(body), `contains \"/\"`) {
			t.Errorf("%s %s: got %d %s, want 400 invalid_argument saying the name contains \"/\"", tc.method, tc.path, status, body)
		}
	}
}
