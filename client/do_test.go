package client

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// decodeBody reads a task as json.Unmarshal would, invalid bodies and
// the server's trailing newline included, and gives a caller's own
// Unmarshaler what json.Unmarshal gives it: the value alone.
func TestDecodeBody(t *testing.T) {
	ok := `{"tenant_id":"acme","task_id":"t1","queue":"q","status":"done","owner":"","lease_until":null,` +
		`"fencing_token":3,"version":2,"attempt":1,"priority":0,"artifact_id":"","payload":{"a":1},"result":null,` +
		`"created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:01.000Z","max_attempts":0,` +
		`"backoff_initial_ms":500,"backoff_max_ms":60000,"available_at":null,"last_error":"","failed_at":null}`
	for _, body := range []string{ok + "\n", " " + ok, "null", ok + "x", `{"task_id":`, `{"task_id":7}`, "\xff"} {
		res := result{meta: Meta{Status: http.StatusOK}, body: []byte(body)}
		var got, want Task
		err := decodeBody(res, &got)
		werr := json.Unmarshal([]byte(body), &want)
		if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("body %q: decodeBody gave %+v, %v; json.Unmarshal %+v, %v", body, got, err, want, werr)
		}
	}
	var raw json.RawMessage
	if err := decodeBody(result{meta: Meta{Status: http.StatusOK}, body: []byte(ok + "\n")}, &raw); err != nil || string(raw) != ok {
		t.Errorf("a caller's json.RawMessage got %q, %v; want the value without the newline", raw, err)
	}
	var nilTask *Task
	if err := decodeBody(result{meta: Meta{Status: http.StatusOK}, body: []byte(ok)}, nilTask); err == nil {
		t.Error("decoding into a nil *Task succeeded")
	}
}
