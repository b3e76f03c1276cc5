package dockertest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestComposeCluster brings up deploy/compose.yaml (three TLS nodes) and
// puts it through the README tour, a killed leader, a partitioned leader,
// a rolling restart and the move to five nodes (compose.five.yaml), one
// after the other on the same project. A failed step stops the rest.
func TestComposeCluster(t *testing.T) {
	requireDocker(t)
	s := newStack(t)
	start := time.Now()
	s.up(three)
	t.Logf("three nodes ready in %v", time.Since(start).Round(time.Millisecond))
	if _, err := s.admin.PutTenant(context.Background(), loadTenant); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		f    func(*stack)
	}{
		{"Tour", testTour},
		{"KillLeaderUnderLoad", testKillLeader},
		{"PartitionLeader", testPartitionLeader},
		{"RollingRestartUnderLoad", testRollingRestart},
		{"ScaleToFive", testScaleToFive},
	} {
		begin := time.Now()
		ok := t.Run(step.name, func(t *testing.T) { step.f(s.with(t)) })
		t.Logf("%s: %v", step.name, time.Since(begin).Round(time.Millisecond))
		if !ok {
			t.Fatalf("%s failed; the later steps are not run", step.name)
		}
	}
}

var three = []string{"n1", "n2", "n3"}

// with is s for a subtest.
func (s *stack) with(t *testing.T) *stack {
	c := *s
	c.t = t
	return &c
}

// testTour runs deploy/README.md's tour through the CLI in the image.
func testTour(s *stack) {
	t := s.t
	out := s.mustCLI("n1", "status")
	for _, want := range []string{"leader:", "state digest:", "n1", "n2", "n3"} {
		if !strings.Contains(out, want) {
			t.Errorf("baton status: no %q in\n%s", want, out)
		}
	}
	if out := s.mustCLI("n2", "version"); strings.Count(out, "dev") < 1 || !strings.Contains(strings.ToLower(out), "server") {
		t.Errorf("baton version: %q", out)
	}
	s.mustCLI("n1", "tenant", "create", "acme")
	s.mustCLI("n2", "task", "create", "--tenant", "acme", "--queue", "research", "--id", "report-42", "--payload", `{"topic":"fencing"}`)
	out = s.mustCLI("n3", "--output", "json", "queue", "claim", "research", "--tenant", "acme", "--owner", "agent-a", "--lease", "30s")
	var claimed struct {
		ID           string `json:"task_id"`
		FencingToken uint64 `json:"fencing_token"`
	}
	if err := json.Unmarshal([]byte(out), &claimed); err != nil {
		t.Fatalf("queue claim --output json: %v\n%s", err, out)
	}
	if claimed.ID != "report-42" || claimed.FencingToken == 0 {
		t.Errorf("claimed %+v, want report-42 with a fencing token", claimed)
	}
	s.mustCLI("n1", "kv", "put", "notes", "topic", `"fencing tokens"`, "--tenant", "acme")
	if out := s.mustCLI("n3", "kv", "get", "notes", "topic", "--tenant", "acme"); !strings.Contains(out, "fencing tokens") {
		t.Errorf("kv get on n3: %q", out)
	}
	// A stale (fenced) token is refused, whichever node is asked.
	if out, err := s.cli("n2", "task", "update", "report-42", "--tenant", "acme", "--token", "1", "--status", "done"); err == nil || !strings.Contains(out, "fenced") {
		t.Errorf("update with a stale token: %v %q", err, out)
	}
	// The same state from the host, over TLS on 127.0.0.1.
	e, err := s.admin.GetKV(context.Background(), "acme", "notes", "topic")
	if err != nil || string(e.Value) != `"fencing tokens"` {
		t.Errorf("kv from the host: %v %v", e, err)
	}
}

// testKillLeader SIGKILLs the leader under load: a new leader serves within
// 2 s and no acknowledged write is lost; the old leader comes back and every
// digest converges.
func testKillLeader(s *stack) {
	t := s.t
	l := startLoad(s.admin, "kill", 4)
	defer l.stop()
	l.waitAcked(t, 100, 30*time.Second)
	old := s.leader(three, 10*time.Second)
	before, err := s.view(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, n := range three {
		if n != old {
			rest = append(rest, n)
		}
	}
	s.docker("kill", "--signal", "KILL", s.id(old))
	killed := time.Now()
	if out := strings.TrimSpace(s.docker("inspect", "--format", "{{.State.Running}}", s.id(old))); out != "false" {
		t.Fatalf("%s still running after docker kill: %s", old, out)
	}
	// A survivor leads in a later term, and a write through it is
	// acknowledged.
	var lead string
	for lead == "" && time.Since(killed) < 10*time.Second {
		for _, n := range rest {
			if st, err := s.view(context.Background(), n); err == nil && st.State == "Leader" && st.Term > before.Term {
				lead = n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lead == "" {
		t.Fatalf("no survivor of %v leads 10s after leader %s (term %d) was killed", rest, old, before.Term)
	}
	probe, err := client.New(client.Config{Endpoints: []string{s.url(lead)}, Token: s.token, CAFile: s.caFile,
		Timeout: time.Second, MaxRetry: 10 * time.Second, NoSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := probe.PutKV(context.Background(), loadTenant, "probe", "after-kill", client.PutKVRequest{Value: json.RawMessage(`1`)}); err != nil {
		t.Fatalf("new leader %s did not serve a write: %v", lead, err)
	}
	took := time.Since(killed)
	t.Logf("leader %s (term %d) killed; %s leads and acknowledged a write %v later", old, before.Term, lead, took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("a new leader served after %v, want within 2s", took)
	}
	l.waitAcked(t, 100, 30*time.Second) // the load flows again
	s.docker("start", s.id(old))
	s.waitReady(old, 60*time.Second)
	l.waitAcked(t, 50, 30*time.Second)
	acked, failed := l.stop()
	t.Logf("load: %d writes acknowledged, %d not (while the leader was down)", len(acked), len(failed))
	s.converge(three, 60*time.Second)
	checkAcked(t, s.admin, acked)
}

// testPartitionLeader disconnects the leader's container from the
// project's network: the minority cannot commit, the majority elects a
// leader and serves; reconnected, every digest converges.
func testPartitionLeader(s *stack) {
	t := s.t
	old := s.leader(three, 10*time.Second)
	var rest []string
	var restURLs []string
	for _, n := range three {
		if n != old {
			rest = append(rest, n)
			restURLs = append(restURLs, s.url(n))
		}
	}
	s.docker("network", "disconnect", s.network, s.id(old))
	reconnected := false
	defer func() {
		if !reconnected {
			run("docker", "network", "connect", "--alias", old, s.network, s.id(old))
		}
	}()
	// The majority elects a leader of its own and serves writes.
	majority, err := client.New(client.Config{Endpoints: restURLs, Token: s.token, CAFile: s.caFile,
		Timeout: time.Second, MaxRetry: 20 * time.Second, NoSession: true})
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if _, err := majority.PutKV(context.Background(), loadTenant, "probe", "majority", client.PutKVRequest{Value: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatalf("the majority %v did not serve a write: %v", rest, err)
	}
	t.Logf("leader %s cut off; the majority %v served a write %v later (leader %s)", old, rest,
		time.Since(cut).Round(time.Millisecond), s.leader(rest, 10*time.Second))
	// The minority cannot commit: a write through the cut-off node, from
	// inside its container (its published port is gone with the network),
	// fails.
	out, err := s.cli(old, "--endpoints", "https://127.0.0.1:7001", "--timeout", "4s",
		"kv", "put", "notes", "minority", `"must not commit"`, "--tenant", "acme")
	if err == nil {
		t.Errorf("a write through the cut-off %s was acknowledged: %s", old, out)
	}
	s.docker("network", "connect", "--alias", old, s.network, s.id(old))
	reconnected = true
	s.waitReady(old, 60*time.Second)
	s.converge(three, 60*time.Second)
	if _, err := s.admin.GetKV(context.Background(), "acme", "notes", "minority"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the minority's write: %v, want not found", err)
	}
	if e, err := s.admin.GetKV(context.Background(), loadTenant, "probe", "majority"); err != nil || string(e.Value) != `"ok"` {
		t.Errorf("the majority's write: %v %v", e, err)
	}
}

// testRollingRestart restarts every member in turn (SIGTERM, start, ready)
// under load: no write fails and none acknowledged is lost.
func testRollingRestart(s *stack) {
	t := s.t
	l := startLoad(s.admin, "roll", 4)
	defer l.stop()
	l.waitAcked(t, 100, 30*time.Second)
	for _, n := range three {
		begin := time.Now()
		s.docker("restart", "--time", "10", s.id(n))
		s.waitReady(n, 60*time.Second)
		l.waitAcked(t, 50, 30*time.Second)
		t.Logf("%s restarted and ready in %v", n, time.Since(begin).Round(time.Millisecond))
	}
	acked, failed := l.stop()
	for i, err := range failed {
		if i < 5 {
			t.Errorf("write failed during the rolling restart: %v", err)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d writes failed", len(failed))
	}
	s.converge(three, 60*time.Second)
	checkAcked(t, s.admin, acked)
}

// testScaleToFive adds compose.five.yaml to the running project: n4 and
// n5 join as voters and every node converges.
func testScaleToFive(s *stack) {
	t := s.t
	s.up(allNodes)
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := s.admin.Cluster(context.Background())
		voters := 0
		if err == nil {
			for _, m := range st.Members {
				if m.Voter {
					voters++
				}
			}
		}
		if voters == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("five voters: %d after 60s (%v)", voters, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.converge(allNodes, 60*time.Second)
	if out := s.mustCLI("n5", "status"); !strings.Contains(out, "n5") {
		t.Errorf("baton status in n5: %s", out)
	}
}
