package client_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"github.com/baton-dev/baton/server/core/tlsconf"
)

// TestConfigFromEnv reads the variables the CLI and the other SDKs read,
// and falls back to the local cluster's endpoints.
func TestConfigFromEnv(t *testing.T) {
	t.Setenv("BATON_ENDPOINTS", " 10.0.0.1:7001, https://10.0.0.2:7001/ ,,")
	t.Setenv("BATON_TOKEN", "tok")
	t.Setenv("BATON_CACERT", "/etc/baton/ca.pem")
	t.Setenv("BATON_CERT", "/etc/baton/me.pem")
	t.Setenv("BATON_KEY", "/etc/baton/me-key.pem")
	got := client.ConfigFromEnv()
	want := client.Config{Endpoints: []string{"10.0.0.1:7001", "https://10.0.0.2:7001/"}, Token: "tok",
		CAFile: "/etc/baton/ca.pem", CertFile: "/etc/baton/me.pem", KeyFile: "/etc/baton/me-key.pem"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ConfigFromEnv() = %+v, want %+v", got, want)
	}

	for _, v := range []string{"BATON_ENDPOINTS", "BATON_TOKEN", "BATON_CACERT", "BATON_CERT", "BATON_KEY"} {
		t.Setenv(v, "")
	}
	c, err := client.FromEnv()
	if err != nil {
		t.Fatalf("FromEnv with no variables: %v", err)
	}
	if got, want := c.Endpoints(), []string{"http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("endpoints %v, want %v", got, want)
	}

	// Without a scheme, an address is https once a CA is given.
	dir := t.TempDir()
	if _, err := tlsconf.Generate(dir, nil, []string{"n1"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BATON_ENDPOINTS", "127.0.0.1:7001")
	t.Setenv("BATON_CACERT", tlsconf.NodeFiles(dir, "n1").CA)
	c, err = client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoints(); len(got) != 1 || got[0] != "https://127.0.0.1:7001" {
		t.Fatalf("endpoints %v, want [https://127.0.0.1:7001]", got)
	}
}

// TestFromEnvTalksToNode: the variables `batond local` prints (https
// endpoints, here without a scheme as the CLI accepts them, a CA file and
// the admin token) reach a real TLS node.
func TestFromEnvTalksToNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := cluster.New(cluster.Config{Binary: batondBin, BaseDir: t.TempDir(), Nodes: 1, Fast: true, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Start(ctx); err != nil {
		t.Fatalf("%v\n%s", err, cl.LogTail(0, 40))
	}
	if _, err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, ep := range cl.Endpoints() {
		eps = append(eps, strings.TrimPrefix(ep, "https://"))
	}
	t.Setenv("BATON_ENDPOINTS", strings.Join(eps, ","))
	t.Setenv("BATON_TOKEN", cl.AdminToken())
	t.Setenv("BATON_CACERT", cl.CAFile())
	t.Setenv("BATON_CERT", "")
	t.Setenv("BATON_KEY", "")
	c, err := client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutTenant(ctx, "fromenv"); err != nil {
		t.Fatalf("PutTenant through FromEnv: %v", err)
	}
	tenants, err := c.ListTenants(ctx)
	if err != nil || !slices.Contains(tenants, "fromenv") {
		t.Fatalf("ListTenants = %v, %v; want fromenv among them", tenants, err)
	}
}
