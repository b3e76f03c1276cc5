package main

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/chaos/artifactfake"
	"github.com/baton-dev/baton/client"
)

// TestArtifactListDelete: ls shows names with their newest version and
// count; rm NAME@VERSION is refused (exit 3, the refs named) while a ref
// points at the version and goes once it moved; rm NAME takes the rest.
func TestArtifactListDelete(t *testing.T) {
	node := artifactfake.New()
	for seed := range uint64(2) {
		file, _ := writeContent(t, 10+seed, 1000)
		if code, _, stderr := artifactCLI(t, node, "artifact", "put", file, "--tenant", "acme", "--name", "report"); code != 0 {
			t.Fatalf("put: exit %d: %s", code, stderr)
		}
	}
	file, _ := writeContent(t, 20, 1000)
	if code, _, stderr := artifactCLI(t, node, "artifact", "put", file, "--tenant", "acme", "--name", "notes"); code != 0 {
		t.Fatalf("put: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := artifactCLI(t, node, "artifact", "ls", "--tenant", "acme")
	if code != 0 || words(stdout) != "NAME LATEST VERSIONS notes 1 1 report 2 2" {
		t.Errorf("ls: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = artifactCLI(t, node, "artifact", "ls", "--tenant", "acme", "--limit", "1")
	if code != 0 || words(stdout) != "NAME LATEST VERSIONS notes 1 1 more: --page-token notes" {
		t.Errorf("ls --limit 1: exit %d stdout %q", code, stdout)
	}

	v1 := node.Versions("report")[0].ArtifactID
	node.PutRef(client.Ref{Ref: "report/approved", ArtifactID: v1})
	code, stdout, stderr = artifactCLI(t, node, "artifact", "rm", "report@1", "--tenant", "acme")
	want := "baton: referenced: refs point at it: report/approved; move or delete them first\n"
	if code != 3 || stderr != want || stdout != "" {
		t.Errorf("rm of a referenced version: exit %d stdout %q stderr %q, want 3 and %q", code, stdout, stderr, want)
	}
	if code, _, stderr := artifactCLI(t, node, "ref", "rm", "report/approved", "--tenant", "acme"); code != 0 {
		t.Fatalf("ref rm: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = artifactCLI(t, node, "artifact", "rm", "report@1", "--tenant", "acme", "--expect", v1)
	if code != 0 || !strings.Contains(stdout, "deleted artifact report version 1") {
		t.Errorf("rm report@1: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	if vs := node.Versions("report"); len(vs) != 1 || vs[0].Version != 2 {
		t.Errorf("versions left: %+v, want only 2", vs)
	}
	if code, _, stderr := artifactCLI(t, node, "artifact", "rm", "report@1", "--tenant", "acme"); code != 4 {
		t.Errorf("rm of a gone version: exit %d stderr %q, want 4", code, stderr)
	}
	code, stdout, stderr = artifactCLI(t, node, "artifact", "rm", "report", "--tenant", "acme", "--expect-version", "2")
	if code != 0 || !strings.Contains(stdout, "deleted artifact report") || len(node.Versions("report")) != 0 {
		t.Errorf("rm report: exit %d stdout %q stderr %q, versions left %d", code, stdout, stderr, len(node.Versions("report")))
	}

	code, stdout, stderr = artifactCLI(t, node, "artifact", "policy", "set", "--tenant", "acme", "--prefix", "run-", "--keep-last", "5")
	if code != 0 || words(stdout) != "PREFIX KEEP LAST run- 5" {
		t.Errorf("policy set: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = artifactCLI(t, node, "artifact", "policy", "ls", "--tenant", "acme")
	if code != 0 || words(stdout) != "PREFIX KEEP LAST run- 5" {
		t.Errorf("policy ls: exit %d stdout %q", code, stdout)
	}
}

// words is s's words joined by single spaces: a table without its padding.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestArtifactLifeRequestsSent: the requests the new commands send.
func TestArtifactLifeRequestsSent(t *testing.T) {
	id := client.Digest([]byte("x"))
	cases := []struct {
		args         []string
		route, query string
		body         string
	}{
		{[]string{"artifact", "ls", "--prefix", "rep", "--limit", "5", "--page-token", "abc", "--stale"}, "GET /v1/tenants/acme/artifacts",
			"limit=5&page_token=abc&prefix=rep&consistency=stale", ""},
		{[]string{"artifact", "rm", "rep@3", "--expect", id}, "DELETE /v1/tenants/acme/artifacts/rep/versions/3", "expect_artifact_id=" + strings.ReplaceAll(id, ":", "%3A"), ""},
		{[]string{"artifact", "rm", "rep", "--expect-version", "7"}, "DELETE /v1/tenants/acme/artifacts/rep", "expect_version=7", ""},
		{[]string{"artifact", "policy", "set", "--keep-last", "0"}, "PUT /v1/tenants/acme/artifact-policies", "", `{"prefix":"","keep_last":0}`},
		{[]string{"artifact", "policy", "ls"}, "GET /v1/tenants/acme/artifact-policies", "", ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			node := artifactfake.New()
			artifactCLI(t, node, append(tc.args, "--tenant", "acme")...)
			reqs := node.Requests()
			if len(reqs) == 0 {
				t.Fatal("no request sent")
			}
			r := reqs[0]
			if r.Route != tc.route || r.Query != tc.query || strings.TrimSpace(r.Body) != tc.body {
				t.Errorf("got %s?%s %s, want %s?%s %s", r.Route, r.Query, r.Body, tc.route, tc.query, tc.body)
			}
		})
	}
}

func TestArtifactLifeUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"artifact", "rm", "--tenant", "acme"}, "missing NAME[@VERSION]"},
		{[]string{"artifact", "rm", "@3", "--tenant", "acme"}, "missing NAME before @"},
		{[]string{"artifact", "rm", "rep@0", "--tenant", "acme"}, "must be a positive integer"},
		{[]string{"artifact", "rm", "rep@x", "--tenant", "acme"}, "must be a positive integer"},
		{[]string{"artifact", "rm", "rep", "--expect", "sha256:1", "--tenant", "acme"}, "--expect goes with NAME@VERSION"},
		{[]string{"artifact", "rm", "rep@2", "--expect-version", "2", "--tenant", "acme"}, "--expect-version goes with a whole artifact"},
		{[]string{"artifact", "policy", "set", "--prefix", "a", "--tenant", "acme"}, "--keep-last is required"},
		{[]string{"artifact", "ls"}, "--tenant"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			node := artifactfake.New()
			code, _, stderr := artifactCLI(t, node, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("got exit %d stderr %q, want 2 and %q", code, stderr, tc.want)
			}
			if n := len(node.Requests()); n != 0 {
				t.Errorf("usage error sent %d requests", n)
			}
		})
	}
}
