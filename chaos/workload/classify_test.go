package workload

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/client"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		outcome history.Outcome
		code    string
	}{
		{"success", nil, history.OK, ""},
		{"fenced", &client.Error{Status: 409, Code: "fenced"}, history.Fail, "fenced"},
		{"not found", &client.Error{Status: 404, Code: "not_found"}, history.Fail, "not_found"},
		{"503 may have applied", &client.Error{Status: 503, Code: "unavailable"}, history.Unknown, "unavailable"},
		{"504 outcome_unknown may have applied", &client.Error{Status: 504, Code: "outcome_unknown"}, history.Unknown, "outcome_unknown"},
		{"500 is a bug", &client.Error{Status: 500, Code: "internal"}, history.Unknown, CodeServerError},
		{"timeout", fmt.Errorf("post: %w", context.DeadlineExceeded), history.Unknown, "timeout"},
		{"connection refused", fmt.Errorf("%w: dial: refused", client.ErrUnavailable), history.Unknown, "unavailable"},
		{"anything else", errors.New("boom"), history.Unknown, "transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcome, code, _ := Classify(tt.err)
			if outcome != tt.outcome || code != tt.code {
				t.Errorf("Classify(%v) = %s %q, want %s %q", tt.err, outcome, code, tt.outcome, tt.code)
			}
		})
	}
}

func TestFillSubsOfAFailedTransaction(t *testing.T) {
	op := &history.Op{Sub: []history.Op{{Kind: history.TaskUpdate}, {Kind: history.TaskCreate}, {Kind: history.KVPut}}}
	err := &client.Error{Status: 409, Code: "fenced", Details: map[string]any{"op_index": float64(0), "current_token": float64(7)}}
	fillSubs(op, nil, err)
	if s := op.Sub[0]; s.Outcome != history.Fail || s.Code != "fenced" || s.Out.CurrentToken == nil || *s.Out.CurrentToken != 7 {
		t.Errorf("failing op: got %s %s %v, want fail fenced with current token 7", s.Outcome, s.Code, s.Out.CurrentToken)
	}
	for _, s := range op.Sub[1:] {
		if s.Outcome != history.Fail || s.Code != history.Aborted {
			t.Errorf("other op %s: got %s %s, want fail %s", s.Kind, s.Outcome, s.Code, history.Aborted)
		}
	}
}
