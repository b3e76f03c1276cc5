// Package prometheus checks Baton's Prometheus files: the alert rules
// (alerts.yaml) with promtool's checker and unit tests (alerts_test.yaml),
// and a real cluster's /metrics with promtool's linter, so that every
// metric follows Prometheus' conventions and every metric a rule reads
// exists. promtool comes from promtool.sh (Debian's package, unpacked
// into bin/tools when none is on PATH); without one the tests fail.
package prometheus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/cmd/batond/cluster"
)

var promtoolPath = sync.OnceValues(func() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("sh", "promtool.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("promtool.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

func promtool(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	p, err := promtoolPath()
	if err != nil {
		t.Fatalf("no promtool, and these tests need one: %v", err)
	}
	cmd := exec.Command(p, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestAlertRules(t *testing.T) {
	if out, err := promtool(t, nil, "check", "rules", "alerts.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err := promtool(t, nil, "test", "rules", "alerts_test.yaml")
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules said no SUCCESS:\n%s", out)
	}
}

// TestMetricsConventions lints the /metrics of a real TLS cluster's
// leader and a follower, after writes, with promtool check metrics
// (snake_case, _total on counters, base units, HELP on every metric), and
// checks that each metric alerts.yaml reads is there.
func TestMetricsConventions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := os.Getenv("BATOND")
	if bin == "" {
		var err error
		if bin, err = cluster.BuildBatond(ctx, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cluster.New(cluster.Config{Binary: bin, BaseDir: t.TempDir(), Nodes: 3, Fast: true, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(0, 40))
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/tenants/acme", ""},
		{http.MethodPost, "/v1/tenants/acme/tasks", `{"task_id":"a","queue":"q","status":"pending"}`},
		{http.MethodPost, "/v1/tenants/acme/tasks/a/claim", `{"owner":"w","lease_ms":60000}`},
	} {
		if _, err := c.AdminCall(ctx, leader, call.method, call.path, []byte(call.body)); err != nil {
			t.Fatalf("%s %s: %v", call.method, call.path, err)
		}
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % c.Size()

	rules, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wanted := map[string]bool{}
	for _, n := range regexp.MustCompile(`\bbaton_[a-z0-9_]+`).FindAllString(string(rules), -1) {
		wanted[n] = true
	}
	if len(wanted) < 8 {
		t.Fatalf("alerts.yaml reads %d metrics; the pattern missed them", len(wanted))
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.ClientTLS()}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for _, i := range []int{leader, follower} {
		body := scrape(t, hc, c.URL(i)+"/metrics")
		if out, err := promtool(t, body, "check", "metrics"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics on %s (%s): %v\n%s", c.ID(i), role(i == leader), err, out)
		}
		present := map[string]bool{}
		for _, line := range strings.Split(string(body), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
				present[f[2]] = true
			}
		}
		var missing []string
		for n := range wanted {
			if !present[n] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s (%s) serves none of %v, which alerts.yaml reads", c.ID(i), role(i == leader), missing)
		}
	}
}

func role(leader bool) string {
	if leader {
		return "leader"
	}
	return "follower"
}

func scrape(t *testing.T, hc *http.Client, url string) []byte {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}

// TestDashboardFilters: the Grafana dashboard has job and instance
// variables, and every Baton series it queries is filtered by both (the
// commit index, a cluster-wide figure, by job alone).
func TestDashboardFilters(t *testing.T) {
	raw, err := os.ReadFile("../grafana/baton.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct{ Name, Type string }
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["job"] != "query" || vars["instance"] != "query" {
		t.Errorf("dashboard variables %v, want job and instance queries", vars)
	}
	sel := regexp.MustCompile(`\b(baton_[a-z0-9_]+)(\{[^}]*\})?`)
	var n int
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range sel.FindAllStringSubmatch(tg.Expr, -1) {
				n++
				if !strings.Contains(m[2], `job=~"$job"`) {
					t.Errorf("panel %q: %s is not filtered by job", p.Title, m[0])
				}
				if !strings.Contains(m[2], `instance=~"$instance"`) && m[1] != "baton_raft_commit_index" {
					t.Errorf("panel %q: %s is not filtered by instance", p.Title, m[0])
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d series in the dashboard's queries", n)
	}
}
