package cluster

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func procsEntries(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			out = append(out, kv)
		}
	}
	return out
}

// Nodes get their share of the cores as GOMAXPROCS, unless the harness's
// environment or Config.Env says otherwise.
func TestNodeGOMAXPROCS(t *testing.T) {
	newCluster := func(env ...string) *Cluster {
		c, err := New(Config{Binary: "batond", BaseDir: t.TempDir(), Env: env})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Setenv("GOMAXPROCS", "") // empty: Go ignores it, and so does the harness
	want := "GOMAXPROCS=" + strconv.Itoa(MemberProcs(DefaultNodes))
	if got := procsEntries(newCluster().env()); !slices.Equal(got, []string{"GOMAXPROCS=", want}) {
		t.Errorf("default: %q, want the harness's empty entry then %q", got, want)
	}
	if got := procsEntries(newCluster("GOMAXPROCS=3").env()); !slices.Equal(got, []string{"GOMAXPROCS=", "GOMAXPROCS=3"}) {
		t.Errorf("Config.Env sets it: %q, want only Config.Env's after the harness's", got)
	}
	t.Setenv("GOMAXPROCS", "5")
	if got := procsEntries(newCluster().env()); !slices.Equal(got, []string{"GOMAXPROCS=5"}) {
		t.Errorf("the harness's environment sets it: %q, want only that", got)
	}
}

// With ProcsRuntime the nodes get no GOMAXPROCS, not even the harness's.
func TestNodeGOMAXPROCSRuntime(t *testing.T) {
	c, err := New(Config{Binary: "batond", BaseDir: t.TempDir(), Procs: ProcsRuntime, Env: []string{"GODEBUG=x=1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, harness := range []string{"", "5"} {
		t.Setenv("GOMAXPROCS", harness)
		env := c.env()
		if got := procsEntries(env); len(got) != 0 {
			t.Errorf("harness GOMAXPROCS=%q: nodes get %q, want none", harness, got)
		}
		if !slices.Contains(env, "GODEBUG=x=1") || !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "BATON_ADMIN_TOKEN=") }) {
			t.Errorf("harness GOMAXPROCS=%q: Config.Env or the token missing from %q", harness, env)
		}
	}
}

func TestMemberProcs(t *testing.T) {
	all := runtime.GOMAXPROCS(0)
	for _, c := range []struct{ n, want int }{
		{0, all}, {1, all}, {2, max(1, all/2)}, {3, max(1, all/3)}, {all + 1, 1}, {1000, 1},
	} {
		if got := MemberProcs(c.n); got != c.want {
			t.Errorf("MemberProcs(%d) = %d with GOMAXPROCS %d, want %d", c.n, got, all, c.want)
		}
	}
}
