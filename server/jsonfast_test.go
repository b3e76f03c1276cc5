package server

import (
	"reflect"
	"testing"
)

var fastSeeds = []string{
	`{"owner":"w1","lease_ms":30000}`,
	`{"owner":"w1","lease_ms":30000,"wait_ms":5000,"set_status":"running"}`,
	` {"owner" : "w1" ,	"lease_ms":0 }` + "\n",
	`{"owner":"w1","statuses":["pending"]}`,
	`{"owner":"w1","Owner":"w2"}`,
	`{"owner":"w1","owner":"w2"}`,
	`{"owner":"w\u00e9"}`,
	`{"owner":"w\n"}`,
	`{"owner":"\xff"}`,
	`{"lease_ms":-1}`,
	`{"lease_ms":1.5}`,
	`{"lease_ms":1e3}`,
	`{"lease_ms":01}`,
	`{"lease_ms":9223372036854775808}`,
	`{"lease_ms":null}`,
	`{"owner":"w1"}x`,
	`{"owner":"w1"} {}`,
	`{}`,
	`{"fencing_token":65537,"status":"done","release":true}`,
	`{"fencing_token":18446744073709551615,"expect_version":3,"expect_status":"running"}`,
	`{"fencing_token":18446744073709551616}`,
	`{"result":{"a":[1,2,{"b":"}"}]},"payload":[true,null]}`,
	`{"result":"text","payload":5}`,
	`{"result":{"a":1}]}`,
	`{"result":{"a":"\"}"}}`,
	`{"result":null}`,
	`{"release":false,"artifact_id":"a1"}`,
	`{"release":"true"}`,
	`{"status":"done",}`,
	`{"status":"done"`,
	`{"status" "done"}`,
	`[]`,
	`{"x":1}`,
	`{"result":{"a":1,"a":2}}`,
	`{"payload":[{"k":1},{"k":1,"k":2}]}`,
	`{"result":"\ud800"}`,
	`{"result":["\udc00"]}`,
	`{"result":["\ud83d\ude00"]}`,
	"{\"result\":[\"\xff\"]}",
	`{"result":{"A":1,"a":1}}`,
	`{"Status":"done"}`,
}

// FuzzFastDecoding: where a fast path accepts a body, decodeStrict
// accepts it too and decodes the same request.
func FuzzFastDecoding(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFast[queueClaimRequest](t, b)
		checkFast[taskUpdateRequest](t, b)
	})
}

func checkFast[T any, PT interface {
	*T
	fastDecoder
}](t *testing.T, b []byte) {
	t.Helper()
	var fast, strict T
	if !PT(&fast).decodeFast(b) {
		if !reflect.ValueOf(fast).IsZero() {
			t.Fatalf("%T: a refused body %q left %+v", fast, b, fast)
		}
		return
	}
	if err := decodeStrict(b, &strict); err != nil {
		t.Fatalf("%T: fast path accepted %q, decodeStrict: %v", fast, b, err)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%T: %q decoded as %+v, decodeStrict: %+v", fast, b, fast, strict)
	}
}

// The bodies the SDK sends take the fast path.
func TestFastDecodingTakesSDKBodies(t *testing.T) {
	var c queueClaimRequest
	if !c.decodeFast([]byte(`{"owner":"w1","lease_ms":30000}`)) || c.Owner != "w1" || c.LeaseMs != 30000 {
		t.Errorf("claim: %+v", c)
	}
	var u taskUpdateRequest
	if !u.decodeFast([]byte(`{"fencing_token":65537,"status":"done","release":true}`)) ||
		u.FencingToken == nil || *u.FencingToken != 65537 || u.Status == nil || *u.Status != "done" || !u.Release {
		t.Errorf("update: %+v", u)
	}
	for _, s := range fastSeeds {
		checkFast[queueClaimRequest](t, []byte(s))
		checkFast[taskUpdateRequest](t, []byte(s))
	}
}
