package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/baton-dev/baton/server/core/node"
)

// memberStatus is a member of GET /v1/cluster: its place in the
// configuration and, with ?probe=true, what it said about itself.
type memberStatus struct {
	node.MemberInfo
	Probe *memberProbe `json:"probe,omitempty"`
}

// memberProbe is a member's own /readyz and /healthz, as the answering
// node got them: its applied and commit index (so its lag), whether it is
// ready, and the version it runs.
type memberProbe struct {
	Reachable    bool   `json:"reachable"`
	Ready        bool   `json:"ready"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	Version      string `json:"version"`
	Error        string `json:"error,omitempty"`
}

// probeTimeout bounds the wait for every member's answers together.
const probeTimeout = time.Second

// probeMembers asks every member, in parallel, for its /readyz and
// /healthz (unauthenticated routes, over the peers' transport), within
// probeTimeout. A member that does not answer is reported unreachable.
func (s *Server) probeMembers(ctx context.Context, members []memberStatus) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range members {
		p := &memberProbe{}
		members[i].Probe = p
		addr := members[i].HTTPAddr
		if addr == "" {
			p.Error = "no HTTP address published yet"
			continue
		}
		wg.Go(func() {
			var ready struct {
				AppliedIndex uint64 `json:"applied_index"`
				CommitIndex  uint64 `json:"commit_index"`
				Error        struct {
					Message      string `json:"message"`
					AppliedIndex uint64 `json:"applied_index"`
					CommitIndex  uint64 `json:"commit_index"`
				} `json:"error"`
			}
			var health struct {
				Version string `json:"version"`
			}
			status, err := s.peerGet(ctx, addr, "/readyz", &ready)
			if err != nil {
				p.Error = err.Error()
				return
			}
			p.Reachable = true
			p.Ready = status == http.StatusOK
			p.AppliedIndex, p.CommitIndex = ready.AppliedIndex, ready.CommitIndex
			if !p.Ready {
				p.AppliedIndex, p.CommitIndex = ready.Error.AppliedIndex, ready.Error.CommitIndex
				p.Error = ready.Error.Message
			}
			if _, err := s.peerGet(ctx, addr, "/healthz", &health); err == nil {
				p.Version = health.Version
			}
		})
	}
	wg.Wait()
}

// peerGet GETs path of the node at addr and decodes at most 64 KiB of its
// JSON answer into v, whatever the status.
func (s *Server) peerGet(ctx context.Context, addr, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.proxy.url(addr, path), nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.proxy.transport.RoundTrip(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, errors.New("no answer within " + probeTimeout.String())
		}
		return 0, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(v); err != nil {
		return resp.StatusCode, errors.New("unreadable answer from " + path + ": " + err.Error())
	}
	return resp.StatusCode, nil
}
