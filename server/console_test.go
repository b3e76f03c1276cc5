package server

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/server/console"
)

// TestConsoleMounted: the web console is served at /ui/ on the API
// listener, without a token (its files hold no data; the page calls the
// API with the token its user signs in with), with its security headers;
// the API beside it still wants a token.
func TestConsoleMounted(t *testing.T) {
	c := newCluster(t, 1)
	c.WaitForLeader(t)
	status, h, body := c.do(t, 0, "GET", "/ui/", nil, nil)
	if status != 200 || !strings.Contains(string(body), "app.js") || h.Get("Content-Security-Policy") != console.CSP {
		t.Fatalf("GET /ui/: %d CSP %q\n%s", status, h.Get("Content-Security-Policy"), body)
	}
	if status, _, _ := c.do(t, 0, "GET", "/ui/app.js", nil, nil); status != 200 {
		t.Errorf("GET /ui/app.js: %d", status)
	}
	if status, _, _ := c.do(t, 0, "GET", "/ui/no-such-file", nil, nil); status != 404 {
		t.Errorf("GET /ui/no-such-file: %d", status)
	}
	if status, _, _ := c.do(t, 0, "GET", "/v1/tenants", nil, nil); status != 401 {
		t.Errorf("GET /v1/tenants without a token: %d", status)
	}
}

// TestConsoleDisabled: with ConsoleDisabled (batond --console-disable)
// /ui/ is an unknown path like any other.
func TestConsoleDisabled(t *testing.T) {
	c := newCluster(t, 1, func(c *testCluster) {
		c.serverConfig = func(cfg *Config) { cfg.ConsoleDisabled = true }
	})
	c.WaitForLeader(t)
	if status, _, body := c.do(t, 0, "GET", "/ui/", nil, nil); status != 404 || errorCode(body) != "not_found" {
		t.Errorf("GET /ui/ with the console disabled: %d %s", status, body)
	}
}
