package client

import (
	"reflect"
	"strings"
	"testing"

	"github.com/baton-dev/baton/client/wire"
)

// TestWireFormsHaveEveryField: every field a request struct sends as is
// has its twin, same name and tag, in the struct's wire form, and every
// field it leaves out of the JSON (json:"-") is replaced there by one
// field of the wire's own. A field added to a request struct and not to
// its wire form would silently never reach the server.
func TestWireFormsHaveEveryField(t *testing.T) {
	for _, tc := range []struct{ req, wire any }{
		{ClaimRequest{}, claimWire{}},
		{QueueClaimRequest{}, queueClaimWire{}},
		{RenewRequest{}, renewWire{}},
		{PutKVRequest{}, wire.KVPut{}},
		{SetRefRequest{}, wire.RefSet{}},
		{CreateTaskRequest{}, createTaskWire{}},
		{UpdateTaskRequest{}, updateTaskWire{}},
		{RetryTaskRequest{}, retryTaskWire{}},
		{QueuePolicy{}, queuePolicyWire{}},
		{Task{}, taskWire{}},
	} {
		rt, wt := reflect.TypeOf(tc.req), reflect.TypeOf(tc.wire)
		sent, replaced := 0, 0
		for f := range rt.Fields() {
			if f.Tag.Get("json") == "-" {
				replaced++
				continue
			}
			sent++
			wf, ok := wt.FieldByName(f.Name)
			if !ok || wf.Tag != f.Tag || wf.Type != f.Type {
				t.Errorf("%s.%s (%s `%s`) has no twin in %s", rt.Name(), f.Name, f.Type, f.Tag, wt.Name())
			}
		}
		// SetRefRequest's two expectation fields become one.
		if strings.HasPrefix(rt.Name(), "SetRef") {
			replaced = 1
		}
		if wt.NumField() != sent+replaced {
			t.Errorf("%s has %d fields, want %d (%d sent as is, %d replaced)", wt.Name(), wt.NumField(), sent+replaced, sent, replaced)
		}
	}
}
