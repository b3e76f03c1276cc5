package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// A member removed from the configuration does not always receive the
// entry that removes it (server/core/node/removed.go), and then goes on
// answering from a state that no longer moves. removalLoop covers that:
// a member that has known no leader for removalAskAfter asks its peers
// for their configuration, and when the leader's configuration
// does not list it, the node takes the leader's word (LearnRemoval). Once
// it knows a leader again, it asks that leader, whose
// configuration listing it again undoes that (ForgetRemoval).

// removalLearner is what the node offers for it.
type removalLearner interface {
	LeaderConfiguration(ctx context.Context) ([]string, error)
	LearnRemoval()
	ForgetRemoval()
	RemovedByLeader() bool
}

const (
	// removalAskAfter is how long a member knows no leader before it
	// asks its peers. It asks every removalAskEvery (also the bound of
	// one round of asks), backing off to removalAskMax while no answer
	// settles anything, so that a member cut off for long asks rarely.
	removalAskAfter = time.Second
	removalAskEvery = time.Second
	removalAskMax   = 30 * time.Second
	// maxConfigurationAnswer bounds a peer's answer read into memory.
	maxConfigurationAnswer = 64 << 10
)

// handleConfiguration is GET /v1/internal/configuration, for members: the
// leader answers once a quorum confirmed it leads, a follower with what it holds.
func (s *Server) handleConfiguration(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	conf := wire.Configuration{NodeID: s.cluster.ID(), Servers: []string{}}
	if l, ok := s.cluster.(removalLearner); ok && s.cluster.IsLeader() {
		servers, err := l.LeaderConfiguration(r.Context())
		if err != nil {
			return err
		}
		conf.Leader, conf.Servers = true, servers
		writeJSON(w, http.StatusOK, conf)
		return nil
	}
	members, err := s.cluster.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		conf.Servers = append(conf.Servers, m.ID)
	}
	writeJSON(w, http.StatusOK, conf)
	return nil
}

// removalLoop runs removalStep until the server closes.
func (s *Server) removalLoop() {
	l, ok := s.cluster.(removalLearner)
	if !ok {
		return
	}
	wait := removalAskEvery
	s.after(wait, func() time.Duration {
		wait = s.removalStep(l, wait)
		return wait
	})
}

// removalStep asks what there is to ask now and returns the wait before
// the next step.
func (s *Server) removalStep(l removalLearner, wait time.Duration) time.Duration {
	leader, _ := s.cluster.Leader()
	self := s.cluster.ID()
	if l.RemovedByLeader() {
		s.askListedAgain(l, leader, self)
		return removalAskEvery
	}
	if leader != "" || s.removed() || time.Since(s.cluster.LastLeaderContact()) < removalAskAfter {
		return removalAskEvery
	}
	if by := s.leaderWithoutMe(); by != "" {
		s.log.Warn("the leader's configuration does not list this node", "leader", by)
		l.LearnRemoval()
		return removalAskEvery
	}
	return min(2*wait, removalAskMax)
}

// askListedAgain asks the leader whether its configuration lists this
// node again, and forgets the removal if so. A node that leads itself
// reads its own configuration: over HTTP it would refuse itself as
// removed, and go on leading a cluster that refuses every request. Only
// the member asked may answer: an answer naming another node is ignored.
func (s *Server) askListedAgain(l removalLearner, leader, self string) {
	ctx, cancel := context.WithTimeout(s.ctx, removalAskEvery)
	defer cancel()
	if leader == self {
		servers, err := l.LeaderConfiguration(ctx)
		if err == nil && slices.Contains(servers, self) {
			s.log.Info("this node leads, and its configuration lists it")
			l.ForgetRemoval()
		}
		return
	}
	addr := s.cluster.HTTPAddrOf(leader)
	if leader == "" || addr == "" {
		return
	}
	conf, err := s.peerConfiguration(ctx, addr)
	if err == nil && conf.Leader && conf.NodeID == leader && slices.Contains(conf.Servers, self) {
		s.log.Info("the leader's configuration lists this node again", "leader", leader)
		l.ForgetRemoval()
	}
}

// leaderWithoutMe asks every peer of this member's configuration, in
// parallel, for its configuration, and returns the id of the one that
// answers as the leader with a configuration that does not list
// this member ("" when none does). An answer must name the member asked.
func (s *Server) leaderWithoutMe() string {
	members, err := s.cluster.Members()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(s.ctx, removalAskEvery)
	defer cancel()
	self := s.cluster.ID()
	var (
		mu sync.Mutex
		by string
		wg sync.WaitGroup
	)
	for _, m := range members {
		if m.ID == self || m.HTTPAddr == "" {
			continue
		}
		wg.Go(func() {
			conf, err := s.peerConfiguration(ctx, m.HTTPAddr)
			if err != nil {
				s.log.Debug("asking a peer for its configuration", "peer", m.ID, "err", err)
				return
			}
			if conf.Leader && conf.NodeID == m.ID && len(conf.Servers) > 0 && !slices.Contains(conf.Servers, self) {
				mu.Lock()
				by = m.ID
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return by
}

// peerConfiguration is one peer's answer to GET /v1/internal/configuration.
func (s *Server) peerConfiguration(ctx context.Context, addr string) (*wire.Configuration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.proxy.url(addr, "/v1/internal/configuration"), nil)
	if err != nil {
		return nil, err
	}
	s.peerAuth(req)
	resp, err := s.proxy.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigurationAnswer+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %.200s", resp.Status, body)
	}
	if len(body) > maxConfigurationAnswer {
		return nil, fmt.Errorf("answer over %d bytes", maxConfigurationAnswer)
	}
	var conf wire.Configuration
	if err := json.Unmarshal(body, &conf); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &conf, nil
}
