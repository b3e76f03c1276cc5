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

// joinLoop asks a running cluster to add this node, retrying until it is a
// member or ctx ends. With peer TLS, hc presents this node's peer
// certificate and token is empty: the certificate is the credential. A node that already has data is in the configuration
// and the request is a harmless re-add.
func joinLoop(ctx context.Context, o *options, token string, hc *http.Client, log *slog.Logger) {
	body, _ := json.Marshal(map[string]any{"id": o.id, "raft_addr": o.advertisedRaft(), "http_addr": o.advertisedHTTP(), "voter": true})
	url := strings.TrimRight(o.join, "/") + "/v1/cluster/members"
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		err := joinOnce(ctx, hc, url, token, body)
		if err == nil {
			log.Info("joined the cluster", "via", o.join)
			return
		}
		log.Warn("join failed; retrying", "via", o.join, "err", err)
		select {
		case <-ctx.Done():
			return
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
