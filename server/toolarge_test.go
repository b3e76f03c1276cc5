package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTooLargeBodyAnswered: a client that sends a whole oversized body
// without Expect: 100-continue (as Python's urllib does) and only then
// reads gets the 413 answer, not a connection reset: the server reads and
// discards a bounded amount of what is left of the body before it closes.
func TestTooLargeBodyAnswered(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s, want 201", status, body)
	}
	chunk := "/v1/tenants/acme/chunks/sha256:" + strings.Repeat("0", 64)
	cases := []struct {
		name    string
		method  string
		path    string
		size    int
		chunked bool
	}{
		{"chunk, declared length", "PUT", chunk, 4<<20 + 1, false},
		{"chunk, chunked encoding", "PUT", chunk, 4<<20 + 1, true},
		{"JSON, declared length", "PUT", "/v1/tenants/acme/kv/ns/k", 1<<20 + 1, false},
		{"JSON, chunked encoding", "PUT", "/v1/tenants/acme/kv/ns/k", 1<<20 + 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", c.nodes[leader].httpAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: baton\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\n",
				tc.method, tc.path, testAdminToken)
			body := strings.Repeat("x", tc.size)
			if tc.chunked {
				head += "Transfer-Encoding: chunked\r\n\r\n"
				var b strings.Builder
				for i := 0; i < len(body); i += 64 << 10 {
					part := body[i:min(i+64<<10, len(body))]
					fmt.Fprintf(&b, "%x\r\n%s\r\n", len(part), part)
				}
				b.WriteString("0\r\n\r\n")
				body = b.String()
			} else {
				head += fmt.Sprintf("Content-Length: %d\r\n\r\n", tc.size)
			}
			// The head first, then the body, as urllib sends them: the
			// server may answer from the head alone.
			if _, err := conn.Write([]byte(head)); err != nil {
				t.Fatalf("writing the request head: %v", err)
			}
			if _, err := conn.Write([]byte(body)); err != nil {
				t.Fatalf("writing the request body: %v, want the whole body accepted", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v, want a 413", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("got status %d, want 413", resp.StatusCode)
			}
		})
	}
}
