package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// buildBatonCLI builds ./cmd/baton into a test directory, as
// cluster.BuildBatond does for the server.
func buildBatonCLI(t *testing.T) string {
	t.Helper()
	root, err := cluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "baton")
	cmd := exec.CommandContext(ctxFor(t, 2*time.Minute), "go", "build", "-o", out, "./cmd/baton")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/baton: %v\n%s", err, msg)
	}
	return out
}

// cliRun is the outcome of one baton invocation.
type cliRun struct {
	stdout, stderr string
	code           int
}

func (r cliRun) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cliRunner runs the baton binary against a cluster.
type cliRunner struct {
	bin       string
	endpoints string
}

// run executes baton with BATON_ENDPOINTS and BATON_TOKEN set and nothing
// else of the caller's BATON_* environment.
func (cr cliRunner) run(t *testing.T, token string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cr.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BATON_ENDPOINTS="+cr.endpoints, "BATON_TOKEN="+token)
	if e2eCAFile != "" {
		cmd.Env = append(cmd.Env, "BATON_CACERT="+e2eCAFile)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("baton %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs baton, requires exit 0 and an empty stderr, and checks that
// stdout matches every pattern.
func (cr cliRunner) ok(t *testing.T, token string, args []string, patterns ...string) cliRun {
	t.Helper()
	r := cr.run(t, token, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("baton %s: got %v\nwant exit 0 and no stderr", strings.Join(args, " "), r)
	}
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(r.stdout) {
			t.Errorf("baton %s: got stdout\n%s\nwant a match for %q", strings.Join(args, " "), r.stdout, p)
		}
	}
	return r
}

// TestCLITour runs the README tour with the real baton binary against a
// three-node cluster: status, members, tenants, a principal with a grant,
// then create, claim and finish a task with the principal's token, with
// --output json parsed where a value is needed, and the error cases.
func TestCLITour(t *testing.T) {
	bin := buildBatonCLI(t)
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	cr := cliRunner{bin: bin, endpoints: strings.Join(c.Endpoints(), ",")}
	admin := c.AdminToken()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	q := regexp.QuoteMeta
	nodeOf := func(id string) int {
		for i := range c.Size() {
			if c.ID(i) == id {
				return i
			}
		}
		t.Fatalf("got node id %q, want one of the cluster's", id)
		return -1
	}

	// status: answered by the leader (leadership may move between two
	// commands on a loaded machine, so the leader is read from the output).
	r := cr.ok(t, admin, []string{"status"},
		`(?m)^applied index:\s+[1-9][0-9]*$`,
		`(?m)^snapshot index:\s+[0-9]+ \(restored [0-9]+\)$`,
		`(?m)^state digest:\s+sha256:[0-9a-f]{64}$`)
	m := regexp.MustCompile(`(?m)^node:\s+(n[0-9]) \(Leader\)\nleader:\s+(n[0-9]) \(http (\S+), raft (\S+)\)\nterm:\s+([0-9]+)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("baton status: got stdout\n%s\nwant node, leader and term lines naming the leader", r.stdout)
	}
	if l := nodeOf(m[2]); m[1] != m[2] || m[3] != c.HTTPAddr(l) || m[4] != c.RaftAddr(l) {
		t.Errorf("baton status: got node %s, leader %s at http %s raft %s, want the answering leader at http %s raft %s",
			m[1], m[2], m[3], m[4], c.HTTPAddr(l), c.RaftAddr(l))
	}
	if term, _ := strconv.ParseUint(m[5], 10, 64); term < st.Term {
		t.Errorf("baton status: got term %d, want >= %d", term, st.Term)
	}
	follower := (leader + 1) % 3
	cr.ok(t, admin, []string{"status", "--at", c.URL(follower)},
		`(?m)^node:\s+`+c.ID(follower)+` \((Follower|Leader|Candidate)\)$`,
		`(?m)^leader:\s+`)

	// members: one row per node with both addresses, one leader. Each
	// node publishes its HTTP address through the log shortly after it
	// learns the leader.
	waitMembers(t, c, []int{0, 1, 2}, []int{0, 1, 2})
	patterns := []string{`(?m)^ID\s+VOTER\s+STATE\s+HTTP ADDR\s+RAFT ADDR$`}
	for i := range 3 {
		patterns = append(patterns, `(?m)^`+c.ID(i)+`\s+true\s+(leader|follower)\s+`+q(c.HTTPAddr(i))+`\s+`+q(c.RaftAddr(i))+`$`)
	}
	r = cr.ok(t, admin, []string{"members"}, patterns...)
	if got := len(regexp.MustCompile(`(?m)^n[0-9]\s+true\s+leader\s`).FindAllString(r.stdout, -1)); got != 1 {
		t.Errorf("baton members: got %d leader rows in\n%s\nwant 1", got, r.stdout)
	}

	// tenants.
	cr.ok(t, admin, []string{"tenant", "create", "acme"}, `^created tenant acme\n$`)
	cr.ok(t, admin, []string{"tenant", "create", "acme"}, `^tenant acme already exists\n$`)
	cr.ok(t, admin, []string{"tenant", "list"}, `^acme\n$`)
	r = cr.ok(t, admin, []string{"--output", "json", "tenant", "list"})
	var tenants struct {
		Tenants []string `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &tenants); err != nil || len(tenants.Tenants) != 1 || tenants.Tenants[0] != "acme" {
		t.Errorf("tenant list --output json: got %q (err %v), want {\"tenants\": [\"acme\"]}", r.stdout, err)
	}

	// A principal whose token does the rest of the tour.
	r = cr.ok(t, admin, []string{"principal", "create", "--tenant", "acme", "--name", "reviewer", "--grant", "tasks::read,write"},
		`(?m)^Created principal reviewer in tenant acme\.$`,
		`(?m)^RESOURCE\s+PREFIX\s+ACTIONS$`,
		`(?m)^tasks\s+-\s+read,write$`)
	m = regexp.MustCompile(`Token \(shown only this once; store it now\):\s+(\S+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("principal create: got stdout\n%s\nwant a token", r.stdout)
	}
	reviewer := m[1]

	cr.ok(t, reviewer, []string{"task", "create", "--tenant", "acme", "--queue", "research", "--id", "r1"},
		`(?m)^task:\s+r1$`, `(?m)^tenant:\s+acme$`, `(?m)^queue:\s+research$`,
		`(?m)^status:\s+pending$`, `(?m)^fencing token:\s+0$`, `(?m)^version:\s+1$`)

	r = cr.ok(t, reviewer, []string{"--output", "json", "queue", "claim", "research", "--tenant", "acme", "--owner", "w1", "--lease", "30s"})
	var claimed client.Task
	if err := json.Unmarshal([]byte(r.stdout), &claimed); err != nil {
		t.Fatalf("queue claim --output json: got %q, want a task: %v", r.stdout, err)
	}
	if claimed.TaskID != "r1" || claimed.Owner != "w1" || claimed.FencingToken == 0 || claimed.Attempt != 1 || claimed.Version != 2 {
		t.Errorf("queue claim: got task %s owner %q token %d attempt %d version %d, want r1 w1 >0 1 2",
			claimed.TaskID, claimed.Owner, claimed.FencingToken, claimed.Attempt, claimed.Version)
	}
	if claimed.LeaseUntil == nil || time.Until(*claimed.LeaseUntil) < 20*time.Second || time.Until(*claimed.LeaseUntil) > 31*time.Second {
		t.Errorf("queue claim: got lease_until %v, want about 30s from now", claimed.LeaseUntil)
	}
	token := fmt.Sprint(claimed.FencingToken)
	cr.ok(t, reviewer, []string{"queue", "claim", "research", "--tenant", "acme", "--owner", "w2", "--lease", "30s"},
		`^no claimable task in queue research\n$`)

	cr.ok(t, reviewer, []string{"task", "update", "r1", "--tenant", "acme", "--token", token, "--status", "done", "--release"},
		`(?m)^task:\s+r1$`, `(?m)^status:\s+done$`, `(?m)^lease until:\s+-$`,
		`(?m)^fencing token:\s+`+token+`$`, `(?m)^version:\s+3$`)
	r = cr.ok(t, reviewer, []string{"--output", "json", "task", "get", "r1", "--tenant", "acme"})
	var done client.Task
	if err := json.Unmarshal([]byte(r.stdout), &done); err != nil {
		t.Fatalf("task get --output json: got %q: %v", r.stdout, err)
	}
	if done.Status != "done" || done.Owner != "" || done.LeaseUntil != nil || done.FencingToken != claimed.FencingToken {
		t.Errorf("task get: got status %q owner %q lease %v token %d, want done, no owner, no lease, token %d",
			done.Status, done.Owner, done.LeaseUntil, done.FencingToken, claimed.FencingToken)
	}
	cr.ok(t, reviewer, []string{"task", "list", "--tenant", "acme", "--queue", "research"},
		`(?m)^TASK\s+QUEUE\s+STATUS\s+OWNER\s+LEASE UNTIL\s+TOKEN\s+VERSION\s+PRIORITY\s+ATTEMPT$`,
		`(?m)^r1\s+research\s+done\s+-\s+-\s+`+token+`\s+3\s+0\s+1$`)

	// Refusals: one line on stderr, nothing on stdout, exit 1. Usage
	// mistakes: exit 2.
	stale := fmt.Sprint(claimed.FencingToken + 1000)
	for _, tc := range []struct {
		name     string
		token    string
		args     []string
		wantCode int
		wantErr  string // the first stderr line
	}{
		{"not found", reviewer, []string{"task", "get", "nope", "--tenant", "acme"}, 1, `^baton: not_found: `},
		{"forbidden", reviewer, []string{"tenant", "list"}, 1, `^baton: forbidden: `},
		{"fenced", reviewer, []string{"task", "update", "r1", "--tenant", "acme", "--token", stale, "--status", "x"}, 1, `^baton: fenced: `},
		{"already exists", reviewer, []string{"task", "create", "--tenant", "acme", "--queue", "research", "--id", "r1"}, 1, `^baton: already_exists: `},
		{"bad token", "not-a-token", []string{"tenant", "list"}, 1, `^baton: unauthenticated: `},
		{"unreachable", admin, []string{"--endpoints", "http://127.0.0.1:1", "--timeout", "1s", "status"}, 1, `^baton: .*unavailable`},
		{"usage", reviewer, []string{"task", "create", "--tenant", "acme"}, 2, `^baton: task create: --queue is required$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cr.run(t, tc.token, tc.args...)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			wantLines := 1
			if tc.wantCode == 2 {
				wantLines = 2 // plus "Run 'baton ... --help' for usage."
			}
			if r.code != tc.wantCode || r.stdout != "" || len(lines) != wantLines || !regexp.MustCompile(tc.wantErr).MatchString(lines[0]) {
				t.Errorf("baton %s: got %v\nwant exit %d, no stdout, %d stderr line(s) starting %q",
					strings.Join(tc.args, " "), r, tc.wantCode, wantLines, tc.wantErr)
			}
		})
	}
	after, err := adminClient(t, c).GetTask(ctx, "acme", "r1")
	if err != nil || after.Status != "done" || after.Version != 3 {
		t.Errorf("r1 after the refused commands: got %+v (err %v), want status done version 3", after, err)
	}

	// Principals are listed without tokens; a rotation shows a new token
	// once and the old one is refused from then on, on every node.
	r = cr.ok(t, admin, []string{"principal", "list", "--tenant", "acme"},
		`(?m)^PRINCIPAL\s+RESOURCE\s+PREFIX\s+ACTIONS$`, `(?m)^reviewer\s+tasks\s+-\s+read,write$`)
	if strings.Contains(r.stdout, reviewer) {
		t.Errorf("principal list shows the token:\n%s", r.stdout)
	}
	r = cr.ok(t, admin, []string{"principal", "rotate", "reviewer", "--tenant", "acme"},
		`(?m)^Rotated the token of principal reviewer in tenant acme`, `(?m)^tasks\s+-\s+read,write$`)
	m = regexp.MustCompile(`Token \(shown only this once; store it now\):\s+(\S+)`).FindStringSubmatch(r.stdout)
	if m == nil || m[1] == reviewer {
		t.Fatalf("principal rotate: got stdout\n%s\nwant a new token", r.stdout)
	}
	rotated := m[1]
	if r := cr.run(t, reviewer, "task", "get", "r1", "--tenant", "acme"); r.code != 1 || !strings.HasPrefix(r.stderr, "baton: unauthenticated: ") {
		t.Errorf("the rotated-out token: got %v, want exit 1 unauthenticated", r)
	}
	cr.ok(t, rotated, []string{"task", "get", "r1", "--tenant", "acme"}, `(?m)^status:\s+done$`)
	foundationNoExits(t, c)
}
