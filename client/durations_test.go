package client

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// TestWireFormsHaveEveryField: every field a request struct sends as is
// has its twin, same name and tag, in the struct's wire form (a type of
// package wire, or the twin kept here for a record the state machine
// renders), and every field it leaves out of the JSON (json:"-") is
// either a path parameter or replaced there by one field of the wire's
// own. A twin has the same type, or is a pointer to it (a plain field of
// the SDK that the server needs to tell absent from zero), or is a string
// for a *time.Time (RFC 3339). A field added to a request struct and not
// to its wire form would silently never reach the server.
func TestWireFormsHaveEveryField(t *testing.T) {
	timeType := reflect.TypeFor[*time.Time]()
	for _, tc := range []struct {
		req, wire any
		path      []string // fields that travel in the path, not the body
	}{
		{ClaimRequest{}, wire.TaskClaim{}, nil},
		{QueueClaimRequest{}, wire.QueueClaim{}, nil},
		{RenewRequest{}, wire.TaskRenew{}, nil},
		{FailTaskRequest{}, wire.TaskFail{}, nil},
		{PutKVRequest{}, wire.KVPut{}, nil},
		{SetRefRequest{}, wire.RefSet{}, nil},
		{CreateTaskRequest{}, wire.TaskCreate{}, nil},
		{UpdateTaskRequest{}, wire.TaskUpdate{}, nil},
		{RetryTaskRequest{}, wire.TaskRetry{}, nil},
		{QueuePolicy{}, wire.QueuePolicy{}, nil},
		{PublishRequest{}, wire.ArtifactPublish{}, nil},
		{ArtifactPolicy{}, wire.ArtifactPolicy{}, nil},
		{PutCheckpointRequest{}, wire.CheckpointPut{}, []string{"NS"}},
		{PutWritesRequest{}, wire.CheckpointWrites{}, []string{"NS", "TaskID"}},
		{Task{}, taskWire{}, nil},
	} {
		rt, wt := reflect.TypeOf(tc.req), reflect.TypeOf(tc.wire)
		sent, replaced := 0, 0
		for f := range rt.Fields() {
			switch {
			case slices.Contains(tc.path, f.Name):
				continue
			case f.Tag.Get("json") == "-":
				replaced++
				continue
			}
			sent++
			wf, ok := wt.FieldByName(f.Name)
			twin := ok && wf.Tag == f.Tag && (wf.Type == f.Type || wf.Type == reflect.PointerTo(f.Type) ||
				f.Type == timeType && wf.Type.Kind() == reflect.String)
			if !twin {
				t.Errorf("%s.%s (%s `%s`) has no twin in %s", rt.Name(), f.Name, f.Type, f.Tag, wt.Name())
			}
		}
		// SetRefRequest's two expectation fields become one.
		if rt.Name() == "SetRefRequest" {
			replaced = 1
		}
		// QueueClaim's max is ClaimQueueBatch's argument, not a field.
		if rt.Name() == "QueueClaimRequest" {
			replaced++
		}
		if n := bodyFields(wt); n != sent+replaced {
			t.Errorf("%s has %d fields, want %d (%d sent as is, %d replaced)", wt.Name(), n, sent+replaced, sent, replaced)
		}
	}
}

// bodyFields counts the members of a wire type: the fields of embedded
// structs (wire.Availability) count one each.
func bodyFields(t reflect.Type) int {
	n := 0
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			n += bodyFields(f.Type)
			continue
		}
		n++
	}
	return n
}
