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
	return cr.runEnv(t, map[string]string{"BATON_TOKEN": token}, args...)
}

// runEnv executes baton with BATON_ENDPOINTS (and BATON_CACERT under TLS)
// set, then env, and nothing else of the caller's BATON_* environment. An
// empty value in env unsets the variable.
func (cr cliRunner) runEnv(t *testing.T, env map[string]string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cr.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	vars := map[string]string{"BATON_ENDPOINTS": cr.endpoints}
	if e2eCAFile != "" {
		vars["BATON_CACERT"] = e2eCAFile
	}
	for k, v := range env {
		vars[k] = v
	}
	for k, v := range vars {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
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
	if !strings.HasSuffix(r.stdout, "\n") {
		t.Errorf("baton %s: stdout %q does not end with a newline", strings.Join(args, " "), r.stdout)
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

	cr.ok(t, reviewer, []string{"task", "update", "r1", "--tenant", "acme", "--fencing-token", token, "--status", "done", "--release"},
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

	// Refusals: one line on stderr, nothing on stdout, an exit status per
	// kind of refusal. Usage mistakes: exit 2.
	stale := fmt.Sprint(claimed.FencingToken + 1000)
	for _, tc := range []struct {
		name     string
		token    string
		args     []string
		wantCode int
		wantErr  string // the first stderr line
	}{
		{"not found", reviewer, []string{"task", "get", "nope", "--tenant", "acme"}, 4, `^baton: not_found: `},
		{"forbidden", reviewer, []string{"tenant", "list"}, 5, `^baton: forbidden: `},
		{"fenced", reviewer, []string{"task", "update", "r1", "--tenant", "acme", "--fencing-token", stale, "--status", "x"}, 3, `^baton: fenced: `},
		{"already exists", reviewer, []string{"task", "create", "--tenant", "acme", "--queue", "research", "--id", "r1"}, 3, `^baton: already_exists: `},
		{"bad token", "not-a-token", []string{"tenant", "list"}, 5, `^baton: unauthenticated: `},
		{"unreachable", admin, []string{"--endpoints", "http://127.0.0.1:1", "--timeout", "1s", "status"}, 6, `^baton: unavailable: `},
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
	if r := cr.run(t, reviewer, "task", "get", "r1", "--tenant", "acme"); r.code != 5 || !strings.HasPrefix(r.stderr, "baton: unauthenticated: ") {
		t.Errorf("the rotated-out token: got %v, want exit 5 unauthenticated", r)
	}
	cr.ok(t, rotated, []string{"task", "get", "r1", "--tenant", "acme"}, `(?m)^status:\s+done$`)
	foundationNoExits(t, c)
}

// expect checks one run: its exit status, that stdout and stderr match
// the patterns ("" means empty) and end with a newline when not empty.
func (r cliRun) expect(t *testing.T, what string, code int, stdout, stderr string) {
	t.Helper()
	match := func(p, s string) bool {
		if p == "" {
			return s == ""
		}
		return regexp.MustCompile(p).MatchString(s) && strings.HasSuffix(s, "\n")
	}
	if r.code != code || !match(stdout, r.stdout) || !match(stderr, r.stderr) {
		t.Errorf("%s: got %v\nwant exit %d, stdout matching %q, stderr matching %q", what, r, code, stdout, stderr)
	}
}

// apiError parses stdout as the API's error object.
func apiError(t *testing.T, r cliRun) map[string]any {
	t.Helper()
	var obj struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj.Error == nil {
		t.Fatalf("stdout is not an error object: %v\n%v", err, r)
	}
	return obj.Error
}

// TestCLIFriction covers, with the real binary against a real cluster,
// each CLI friction point of the issue that asked for the cobra CLI: flags
// after the command and their short forms, endpoints without a scheme,
// the version, errors as JSON with an exit status per kind, the same verbs
// everywhere, help for a command, artifact get without a file, refusals in
// words, and a newline at the end of every output.
func TestCLIFriction(t *testing.T) {
	bin := buildBatonCLI(t)
	c := startCluster(t, 3)
	admin := c.AdminToken()
	cr := cliRunner{bin: bin, endpoints: strings.Join(c.Endpoints(), ",")}
	q := regexp.QuoteMeta
	env := func(kv ...string) map[string]string {
		m := map[string]string{"BATON_TOKEN": admin}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cr.ok(t, admin, []string{"tenant", "create", "acme"}, `^created tenant acme\n$`)

	t.Run("global flags after the command, short forms, env", func(t *testing.T) {
		for _, args := range [][]string{{"status", "--output", "json"}, {"status", "-o", "json"}, {"-o", "json", "status"}, {"status", "-ojson"}} {
			r := cr.ok(t, admin, args)
			var st client.ClusterStatus
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Leader.ID == "" || len(st.Members) != 3 {
				t.Errorf("baton %s: got %q (%v), want the cluster status as JSON", strings.Join(args, " "), r.stdout, err)
			}
		}
		cr.ok(t, admin, []string{"status", "-o", "yaml"}, `(?m)^leader:\n  http_addr: `, `(?m)^members:\n- `, `(?m)^state_digest: sha256:[0-9a-f]{64}$`)
		cr.ok(t, admin, []string{"tenant", "list", "-o", "table"}, `^acme\n$`)
		cr.ok(t, admin, []string{"tenant", "list", "-o", "text"}, `^acme\n$`)
		cr.runEnv(t, env("BATON_OUTPUT", "json"), "tenant", "ls").expect(t, "BATON_OUTPUT=json", 0, `^\{\n  "tenants": \[\n    "acme"\n  \]\n\}\n$`, "")
		cr.runEnv(t, env("BATON_OUTPUT", "json"), "tenant", "ls", "-o", "table").expect(t, "-o table over BATON_OUTPUT", 0, `^acme\n$`, "")
		cr.runEnv(t, env("BATON_TENANT", "acme"), "task", "create", "--queue", "q", "--id", "env-task").
			expect(t, "BATON_TENANT", 0, `(?m)^tenant:\s+acme$`, "")
		cr.runEnv(t, env("BATON_TIMEOUT", "soon"), "status").
			expect(t, "a bad BATON_TIMEOUT", 2, "", `^baton: BATON_TIMEOUT="soon": .*\nRun 'baton status --help' for usage\.\n$`)
		// --token after the command; the environment's token is wrong.
		cr.runEnv(t, env("BATON_TOKEN", "not-a-token"), "tenant", "list", "--token", admin).expect(t, "--token after the command", 0, `^acme\n$`, "")
		cr.runEnv(t, env("BATON_TOKEN", "not-a-token"), "tenant", "list").expect(t, "BATON_TOKEN", 5, "", `^baton: unauthenticated: `)
	})

	t.Run("endpoints without a scheme", func(t *testing.T) {
		hosts := make([]string, c.Size())
		for i := range hosts {
			hosts[i] = c.HTTPAddr(i)
		}
		// https when BATON_CACERT is set (the TLS run), http otherwise.
		r := cr.runEnv(t, env("BATON_ENDPOINTS", ""), "--endpoints", strings.Join(hosts, ","), "status")
		r.expect(t, "--endpoints host:port", 0, `(?m)^leader:\s+n[0-9] `, "")
		r = cr.runEnv(t, env("BATON_ENDPOINTS", hosts[1]), "members")
		r.expect(t, "BATON_ENDPOINTS host:port", 0, `(?m)^ID\s+VOTER\s+STATE`, "")
		r = cr.runEnv(t, env(), "status", "-e", hosts[0])
		r.expect(t, "-e host:port", 0, `(?m)^leader:\s+n[0-9] `, "")
		r = cr.runEnv(t, env(), "status", "--at", hosts[2])
		r.expect(t, "status --at host:port", 0, `(?m)^node:\s+`+c.ID(2)+` `, "")
		r = cr.runEnv(t, env(), "status", "-e", "ftp://"+hosts[0])
		r.expect(t, "an endpoint with another scheme", 2, "", `^baton: --endpoints: .*scheme must be http or https\n`)
	})

	t.Run("version", func(t *testing.T) {
		cr.runEnv(t, env(), "--version").expect(t, "baton --version", 0, `^baton \S+ \(commit \S+, go[0-9.]+\)\n$`, "")
		cr.runEnv(t, env(), "version").expect(t, "baton version", 0,
			`^client: baton \S+ \(commit \S+, go[0-9.]+\)\nserver: batond \S+ \(node n[0-9]\)\n$`, "")
		r := cr.runEnv(t, env(), "version", "-o", "json")
		var v struct {
			Client map[string]string `json:"client"`
			Server map[string]string `json:"server"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Client["version"] == "" || v.Server["node_id"] == "" {
			t.Errorf("version -o json: got %v (%v)", r, err)
		}
	})

	t.Run("errors with -o json and exit statuses", func(t *testing.T) {
		r := cr.runEnv(t, env(), "task", "get", "nope", "--tenant", "acme", "-o", "json")
		r.expect(t, "not found", 4, `^\{\n`, `^baton: not_found: task "nope" not found\n$`)
		if e := apiError(t, r); e["code"] != "not_found" || e["message"] != `task "nope" not found` {
			t.Errorf("not found: got error object %v", e)
		}
		r = cr.runEnv(t, env(), "status", "-o", "json", "-e", "127.0.0.1:1", "--timeout", "1s")
		r.expect(t, "unreachable", 6, `^\{\n`, `^baton: unavailable: no node answered \(endpoints 127\.0\.0\.1:1\): `)
		if e := apiError(t, r); e["code"] != "unavailable" || !strings.Contains(e["message"].(string), "127.0.0.1:1") {
			t.Errorf("unreachable: got error object %v", e)
		}
		r = cr.runEnv(t, env("BATON_TOKEN", "not-a-token"), "tenant", "list", "-o", "yaml")
		r.expect(t, "unauthenticated as yaml", 5, `^error:\n  code: unauthenticated\n  message: `, `^baton: unauthenticated: `)
		r = cr.runEnv(t, env(), "task", "frobnicate", "-o", "json")
		r.expect(t, "usage", 2, `"code": "usage"`, `^baton: unknown command "frobnicate" for "baton task"\nRun 'baton task --help' for usage\.\n$`)

		// fenced, lease_held: exit 3, the details in the object.
		cr.ok(t, admin, []string{"task", "create", "--tenant", "acme", "--queue", "research", "--id", "f1"})
		r = cr.ok(t, admin, []string{"task", "claim", "f1", "--tenant", "acme", "--owner", "w1", "--lease", "30s", "-o", "json"})
		var claimed client.Task
		if err := json.Unmarshal([]byte(r.stdout), &claimed); err != nil {
			t.Fatalf("claim -o json: %v\n%v", err, r)
		}
		cur := fmt.Sprint(claimed.FencingToken)
		r = cr.runEnv(t, env(), "task", "update", "f1", "--tenant", "acme", "--fencing-token", "1", "--status", "done", "-o", "json")
		r.expect(t, "fenced", 3, `^\{\n`, `^baton: fenced: fencing token 1 is not current for task "f1" \(the current token is `+cur+`: the task was claimed again since\); the update was refused\n$`)
		if e := apiError(t, r); e["code"] != "fenced" || fmt.Sprint(e["current_token"]) != cur {
			t.Errorf("fenced: got error object %v, want current_token %s", e, cur)
		}
		r = cr.runEnv(t, env(), "task", "claim", "f1", "--tenant", "acme", "--owner", "w2", "--lease", "30s")
		r.expect(t, "lease held", 3, "", `^baton: lease_held: task "f1" is leased by "w1" until \S+; the claim was refused \(wait for the lease to end\)\n$`)
		r = cr.runEnv(t, env(), "task", "claim", "f1", "--tenant", "acme", "--owner", "w1", "--lease", "30s", "--expect-version", "1")
		r.expect(t, "claim --expect-version", 3, "", `^baton: version_mismatch: task "f1" is at version 2, not the expected 1; --expect-version refused the claim\n$`)
		// The --token N of older releases is still the fencing token, with a warning.
		r = cr.runEnv(t, env(), "task", "update", "f1", "--tenant", "acme", "--token", cur, "--status", "done", "--release")
		r.expect(t, "task update --token N", 0, `(?m)^status:\s+done$`, `^baton: warning: --token `+cur+` is read as --fencing-token `+cur+`; `)
	})

	t.Run("the same verbs everywhere", func(t *testing.T) {
		cr.ok(t, admin, []string{"kv", "put", "notes", "a", `{"n":1}`, "--tenant", "acme"}, `(?m)^version:\s+[0-9]+$`)
		for _, verb := range []string{"list", "ls"} {
			cr.ok(t, admin, []string{"kv", verb, "notes", "--tenant", "acme"}, `(?m)^KEY\s+VERSION\s+EXPIRES\s+VALUE\na\s+`)
			cr.ok(t, admin, []string{"task", verb, "--tenant", "acme"}, `(?m)^f1\s+research\s+done`)
			cr.ok(t, admin, []string{"principal", verb, "--tenant", "acme"}, `^PRINCIPAL\s+RESOURCE\s+PREFIX\s+ACTIONS\n$`)
			cr.ok(t, admin, []string{"ref", verb, "--tenant", "acme"}, `^REF\s+ARTIFACT ID`)
			cr.ok(t, admin, []string{"tenant", verb}, `^acme\n$`)
			cr.ok(t, admin, []string{"members", verb}, `(?m)^ID\s+VOTER`)
			cr.ok(t, admin, []string{"checkpoint", verb, "--tenant", "acme", "--thread", "none"}, `^CHECKPOINT\s+PARENT\s+CREATED\s+METADATA\n$`)
		}
		cr.ok(t, admin, []string{"kv", "get", "notes", "a", "--tenant", "acme"}, `(?m)^value:\s+\{"n":1\}$`)
		cr.ok(t, admin, []string{"kv", "delete", "notes", "a", "--tenant", "acme"}, `^deleted notes/a\n$`)
		for _, verb := range []string{"rm", "del"} {
			cr.ok(t, admin, []string{"kv", "put", "notes", "b", "1", "--tenant", "acme"})
			cr.ok(t, admin, []string{"kv", verb, "notes", "b", "--tenant", "acme"}, `^deleted notes/b\n$`)
		}
		cr.ok(t, admin, []string{"task", "create", "--tenant", "acme", "--queue", "q", "--id", "gone"})
		cr.ok(t, admin, []string{"task", "rm", "gone", "--tenant", "acme"}, `^deleted task gone\n$`)
		cr.ok(t, admin, []string{"principal", "create", "bot", "--tenant", "acme", "--grant", "kv::read"}, `(?m)^Created principal bot in tenant acme\.$`)
		cr.ok(t, admin, []string{"principal", "revoke", "--tenant", "acme", "--name", "bot"}, `^revoked principal bot in tenant acme\n$`)
		cr.ok(t, admin, []string{"principal", "create", "--name", "bot2", "--tenant", "acme", "--grant", "kv::read"})
		cr.ok(t, admin, []string{"principal", "delete", "bot2", "--tenant", "acme"}, `^revoked principal bot2 in tenant acme\n$`)
		cr.runEnv(t, env(), "kv", "lst", "notes").expect(t, "a misspelt verb", 2, "",
			`^baton: unknown command "lst" for "baton kv"; did you mean .*"list".*\nRun 'baton kv --help' for usage\.\n$`)
	})

	t.Run("help for a command", func(t *testing.T) {
		cr.runEnv(t, env(), "help", "task").expect(t, "help task", 0, `(?s)^Create, inspect, claim and update tasks.*\n  baton task COMMAND \[flags\]\n.*\n  claim .*\n  list `, "")
		cr.runEnv(t, env(), "help", "task", "claim").expect(t, "help task claim", 0, `(?m)^  baton task claim ID \[flags\]$`, "")
		cr.runEnv(t, env(), "kv", "put", "--help").expect(t, "kv put --help", 0, `(?m)^  baton kv put NAMESPACE KEY VALUE_JSON \[flags\]$`, "")
		cr.runEnv(t, env(), "--help").expect(t, "--help", 0, `(?s)Exit status:.*3  conflict.*6  the cluster cannot answer`, "")
		cr.runEnv(t, env(), "completion", "bash").expect(t, "completion bash", 0, `(?m)^# bash completion V2 for baton`, "")
		cr.runEnv(t, env(), "completion", "zsh").expect(t, "completion zsh", 0, `(?m)^#compdef baton$`, "")
		cr.runEnv(t, env(), "completion", "fish").expect(t, "completion fish", 0, `(?m)^# fish completion for baton`, "")
		// What the shell's completion function asks when completing "baton kv l".
		cr.runEnv(t, env(), "__complete", "kv", "l").expect(t, "completion of kv l", 0, `^list\tList the entries `, `^Completion ended with directive`)
	})

	t.Run("artifacts and refs", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "draft.md")
		if err := os.WriteFile(file, []byte("# draft one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cr.ok(t, admin, []string{"artifact", "put", file, "--tenant", "acme", "--name", "draft", "-o", "json"})
		var m1 client.Manifest
		if err := json.Unmarshal([]byte(r.stdout), &m1); err != nil {
			t.Fatalf("artifact put -o json: %v\n%v", err, r)
		}
		// Without --file the content streams to stdout.
		cr.ok(t, admin, []string{"artifact", "get", "draft", "--tenant", "acme"}, `^# draft one\n$`)
		out := filepath.Join(dir, "out.md")
		cr.ok(t, admin, []string{"artifact", "get", "draft", "--tenant", "acme", "--file", out},
			`^wrote `+q(out)+`: 12 bytes, draft v1, digest sha256:[0-9a-f]{64} verified, in \S+, \S+ MB/s\n$`)
		if b, err := os.ReadFile(out); err != nil || string(b) != "# draft one\n" {
			t.Errorf("artifact get --file wrote %q (%v)", b, err)
		}
		old := filepath.Join(dir, "old.md")
		cr.runEnv(t, env(), "artifact", "get", "draft", "--tenant", "acme", "-o", old).
			expect(t, "artifact get -o FILE (older form)", 0, `^wrote `+q(old)+`: `, `^baton: warning: -o `+q(old)+` is read as --file `)

		if err := os.WriteFile(file, []byte("# draft two\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r = cr.ok(t, admin, []string{"artifact", "put", file, "--tenant", "acme", "--name", "draft", "-o", "json"})
		var m2 client.Manifest
		if err := json.Unmarshal([]byte(r.stdout), &m2); err != nil || m2.ArtifactID == m1.ArtifactID {
			t.Fatalf("second artifact put: %v\n%v", err, r)
		}
		cr.ok(t, admin, []string{"ref", "put", "draft/approved", m1.ArtifactID, "--tenant", "acme", "--expect-absent"}, `(?m)^revision:\s+1$`)
		r = cr.runEnv(t, env(), "ref", "set", "draft/approved", m2.ArtifactID, "--tenant", "acme", "--expect-absent")
		r.expect(t, "ref set --expect-absent on an existing ref", 3, "",
			`^baton: version_mismatch: ref "draft/approved" exists \(points to `+q(m1.ArtifactID)+`\); --expect-absent refused the move\n$`)
		r = cr.runEnv(t, env(), "ref", "set", "draft/approved", m2.ArtifactID, "--tenant", "acme", "--expect-absent", "-o", "json")
		if e := apiError(t, r); r.code != 3 || e["code"] != "version_mismatch" || e["artifact_id"] != m1.ArtifactID {
			t.Errorf("ref set --expect-absent -o json: got %v, want exit 3 and artifact_id %s", r, m1.ArtifactID)
		}
		r = cr.runEnv(t, env(), "ref", "delete", "draft/approved", "--tenant", "acme", "--expect", m2.ArtifactID)
		r.expect(t, "ref delete --expect another id", 3, "",
			`^baton: version_mismatch: ref "draft/approved" points to `+q(m1.ArtifactID)+`, not the expected `+q(m2.ArtifactID)+`; --expect refused the delete\n$`)
		cr.runEnv(t, env(), "kv", "put", "notes", "lock", `"w1"`, "--tenant", "acme").expect(t, "kv put", 0, `(?m)^key:\s+lock$`, "")
		r = cr.runEnv(t, env(), "kv", "put", "notes", "lock", `"w2"`, "--tenant", "acme", "--expect-version", "0")
		r.expect(t, "kv put --expect-version 0 on an existing entry", 3, "",
			`^baton: version_mismatch: entry notes/lock exists \(version [0-9]+\); --expect-version 0 \(only if absent\) refused the write\n$`)
		cr.ok(t, admin, []string{"ref", "rm", "draft/approved", "--tenant", "acme"}, `^deleted ref draft/approved\n$`)
		cr.runEnv(t, env(), "ref", "get", "draft/approved", "--tenant", "acme").expect(t, "ref get after rm", 4, "", `^baton: not_found: ref "draft/approved" not found\n$`)
	})
	foundationNoExits(t, c)
}

// baton status asks every member for its own view: after the leader is
// SIGKILLed, the new leader's status lists it as not answering (not as a
// healthy follower), and the others as answering with their lag.
func TestCLIStatusShowsADeadMember(t *testing.T) {
	bin := buildBatonCLI(t)
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	cr := cliRunner{bin: bin, endpoints: strings.Join(c.Endpoints(), ",")}
	admin := c.AdminToken()
	waitMembers(t, c, []int{0, 1, 2}, []int{0, 1, 2})
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := cr.ok(t, admin, []string{"status"}, `(?m)^ID\s+VOTER\s+ANSWERS\s+STATE\s+TERM\s+APPLIED\s+LAG\s+HTTP ADDR$`)
	for i := range 3 {
		if !regexp.MustCompile(`(?m)^` + c.ID(i) + `\s+true\s+yes\s+(Leader|Follower)\s+[0-9]+\s+[0-9]+\s+[0-9]+\s+`).MatchString(r.stdout) {
			t.Fatalf("baton status with every node up: got\n%s\nwant %s answering", r.stdout, c.ID(i))
		}
	}
	// members promote: a voter stays one; an unknown member is not_found.
	cr.ok(t, admin, []string{"members", "promote", c.ID(0)}, `^member `+c.ID(0)+` is a voter\n$`)
	if r := cr.run(t, admin, "members", "promote", "n9"); r.code != 4 || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("baton members promote n9: got %v, want exit 4, not_found", r)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	others := []int{(leader + 1) % 3, (leader + 2) % 3}
	if _, err := c.WaitLeader(ctx, others...); err != nil {
		t.Fatal(err)
	}
	dead := regexp.MustCompile(`(?m)^` + c.ID(leader) + `\s+true\s+no: `)
	live := cliRunner{bin: bin, endpoints: c.URL(others[0]) + "," + c.URL(others[1])}
	for {
		r = live.run(t, admin, "status")
		if r.code == 0 && dead.MatchString(r.stdout) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("baton status after %s was killed: got %v\nwant it listed as not answering", c.ID(leader), r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, i := range others {
		if !regexp.MustCompile(`(?m)^` + c.ID(i) + `\s+true\s+yes\s+(Leader|Follower)\s+`).MatchString(r.stdout) {
			t.Errorf("baton status: got\n%s\nwant %s answering", r.stdout, c.ID(i))
		}
	}
	j := live.run(t, admin, "status", "-o", "json")
	var out struct {
		Nodes []struct {
			ID      string `json:"id"`
			Answers bool   `json:"answers"`
			Error   string `json:"error"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &out); err != nil || len(out.Nodes) != 3 {
		t.Fatalf("baton status -o json: %v; got %v", err, j)
	}
	for _, n := range out.Nodes {
		if want := n.ID != c.ID(leader); n.Answers != want || (n.Error != "") == want {
			t.Errorf("baton status -o json: node %+v, want answers=%v", n, want)
		}
	}
}
