package client

import (
	"net/http"
	"testing"
)

// The default HTTP client is net/http's Transport for plain HTTP too
// (the SDK's own plain-HTTP transport is gone), with TLS settings
// refused beside a caller's HTTPClient.
func TestDefaultHTTPClientTransport(t *testing.T) {
	for _, ep := range []string{"http://127.0.0.1:1", "https://127.0.0.1:1"} {
		c, err := New(Config{Endpoints: []string{ep}})
		if err != nil {
			t.Fatal(err)
		}
		tr, ok := c.hc.Transport.(*http.Transport)
		if !ok {
			t.Fatalf("%s: the default client's transport is %T, want *http.Transport", ep, c.hc.Transport)
		}
		if tr.MaxIdleConnsPerHost != 256 {
			t.Errorf("%s: MaxIdleConnsPerHost %d, want 256", ep, tr.MaxIdleConnsPerHost)
		}
	}
	if err := (Config{Endpoints: []string{"http://127.0.0.1:1"}, CAFile: "ca.pem",
		HTTPClient: http.DefaultClient}).Validate(); err == nil {
		t.Error("CAFile with an HTTPClient of the caller's: no error")
	}
}
