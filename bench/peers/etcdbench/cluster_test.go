package etcdbench

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-dev/baton/cmd/batond/cluster"
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

// The members' GOMAXPROCS follows the rule Baton's members follow.
func TestMemberEnv(t *testing.T) {
	share := "GOMAXPROCS=" + strconv.Itoa(cluster.MemberProcs(3))
	for _, tc := range []struct {
		name    string
		environ []string
		rule    cluster.ProcsRule
		want    []string
	}{
		{"share", []string{"HOME=/h"}, cluster.ProcsShare, []string{share}},
		{"share, empty inherited", []string{"GOMAXPROCS="}, cluster.ProcsShare, []string{"GOMAXPROCS=", share}},
		{"share, inherited", []string{"GOMAXPROCS=5"}, cluster.ProcsShare, []string{"GOMAXPROCS=5"}},
		{"runtime", []string{"HOME=/h"}, cluster.ProcsRuntime, nil},
		{"runtime, inherited", []string{"GOMAXPROCS=5", "HOME=/h"}, cluster.ProcsRuntime, nil},
	} {
		env, err := memberEnv(tc.environ, tc.rule, 3)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := procsEntries(env); !slices.Equal(got, tc.want) {
			t.Errorf("%s: GOMAXPROCS entries %q, want %q", tc.name, got, tc.want)
		}
		if slices.Contains(tc.environ, "HOME=/h") && !slices.Contains(env, "HOME=/h") {
			t.Errorf("%s: the rest of the environment is lost: %q", tc.name, env)
		}
	}
	if _, err := memberEnv(nil, cluster.ProcsRule(9), 3); err == nil {
		t.Error("unknown rule: got no error")
	}
}
