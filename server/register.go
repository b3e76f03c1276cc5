package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// registerLoop publishes this node's HTTP address in the replicated
// membership, so followers can forward to it when it leads. It checks every
// half second and acts only when the replicated record is missing or stale.
func (s *Server) registerLoop() {
	s.every(500*time.Millisecond, func() {
		if err := s.registerSelf(); err != nil {
			s.log.Debug("publishing HTTP address", "err", err)
		}
		if err := s.publishLimits(); err != nil {
			s.log.Debug("publishing limits", "err", err)
		}
	})
}

func (s *Server) registerSelf() error {
	me := fsm.Member{ID: s.cluster.ID(), RaftAddr: s.cluster.RaftAddr(), HTTPAddr: s.cluster.HTTPAddr()}
	if cur, ok := s.fsm.Members()[me.ID]; ok && cur == me {
		return nil
	}
	leader, _ := s.cluster.Leader()
	if leader == "" {
		return fmt.Errorf("no leader yet")
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if s.cluster.IsLeader() {
		_, err := s.replica.ProposeOwn(ctx, fsm.KindMemberSet, "", &me)
		return err
	}
	addr := s.cluster.HTTPAddrOf(leader)
	if addr == "" {
		return fmt.Errorf("leader %s has not published its address yet", leader)
	}
	body, _ := json.Marshal(map[string]string{"raft_addr": me.RaftAddr, "http_addr": me.HTTPAddr})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.proxy.url(addr, "/v1/cluster/members/"+me.ID+"/meta"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	s.peerAuth(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.proxy.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("leader answered %s", resp.Status)
	}
	return nil
}
