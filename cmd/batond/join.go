package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// joinLoop asks a running cluster to add this node as a non-voter (etcd's
// learner: it replicates the log but counts in no quorum), then, once it
// has caught up, to promote it to voter, retrying each step until it is
// done or ctx ends. The leader decides "caught up" by this node's /readyz.
// So a new node never weakens the quorum while it copies a large state.
// With peer TLS, hc presents this node's peer certificate and token is
// empty: the certificate is the credential. A node that already has data
// is in the configuration, and both requests are harmless: adding a voter
// as a non-voter leaves it a voter, and promoting a voter does nothing.
func joinLoop(ctx context.Context, o *options, token string, hc *http.Client, log *slog.Logger) {
	body, _ := json.Marshal(map[string]any{"id": o.id, "raft_addr": o.advertisedRaft(), "http_addr": o.advertisedHTTP(), "voter": false})
	base := strings.TrimRight(o.join, "/") + "/v1/cluster/members"
	if !retryUntil(ctx, func() error { return joinOnce(ctx, hc, base, token, body) }, func(err error) {
		log.Warn("join failed; retrying", "via", o.join, "err", err)
	}) {
		return
	}
	log.Info("joined the cluster as a non-voter; promoting once caught up", "via", o.join)
	if retryUntil(ctx, func() error { return joinOnce(ctx, hc, base+"/"+o.id+"/promote", token, nil) }, func(err error) {
		log.Info("not promoted yet; retrying", "err", err)
	}) {
		log.Info("promoted to voter", "via", o.join)
	}
}

// retryUntil calls f every second until it succeeds (true) or ctx ends
// (false), reporting each failure.
func retryUntil(ctx context.Context, f func() error, failed func(error)) bool {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return true
		}
		failed(err)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func joinOnce(ctx context.Context, hc *http.Client, url, token string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil
}
