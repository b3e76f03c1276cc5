package e2e

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBuildInfo: every node says which build it runs, in GET /v1/cluster
// and as baton_build_info on /metrics.
func TestBuildInfo(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 30*time.Second)
	admin := adminClient(t, c)
	st, err := admin.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Build.Version == "" || st.Build.GoVersion != runtime.Version() {
		t.Errorf("/v1/cluster build: %+v; want a version and %s", st.Build, runtime.Version())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(1)+"/metrics", nil)
	resp, err := httpFor(c).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `baton_build_info{commit=`) || !strings.Contains(string(body), `go_version="`+runtime.Version()+`"`) {
		t.Errorf("/metrics has no baton_build_info with go_version %s", runtime.Version())
	}
}
