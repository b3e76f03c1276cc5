package fsm

import (
	"reflect"
	"strings"
	"testing"
)

// TestCommandTableArgs holds the command table's Args column to what each
// handler decodes, and checks that every handler refuses arguments that do
// not decode with invalid_argument and no change to the state.
func TestCommandTableArgs(t *testing.T) {
	var seen []any
	argsDecoded = func(_ Kind, v any) { seen = append(seen, v) }
	t.Cleanup(func() { argsDecoded = nil })
	for _, s := range commandTable {
		f := New()
		applyOne(t, f, 1, tenantPut(1, "acme"))
		seen = nil
		args := reflect.New(reflect.TypeOf(s.Args))
		r := applyOne(t, f, 2, &Command{Kind: s.Kind, Now: 2, Tenant: "acme", Args: encode(args.Interface())})
		switch {
		case len(seen) == 0:
			t.Errorf("%s: the handler decoded no arguments (%s)", s.Kind, describe(r))
		case reflect.TypeOf(seen[0]) != args.Type():
			t.Errorf("%s: the table says its args are %v, the handler decodes %T", s.Kind, args.Type(), seen[0])
		case strings.Contains(r.Message, "bad arguments"):
			t.Errorf("%s: zero %v refused as bad arguments: %s", s.Kind, args.Type(), describe(r))
		}

		before := f.Status()
		r = applyOne(t, f, 3, &Command{Kind: s.Kind, Now: 2, Tenant: "acme", Args: []byte{0xc1}})
		if r.Code != CodeInvalidArgument {
			t.Errorf("%s with undecodable args: got %s, want %s", s.Kind, describe(r), CodeInvalidArgument)
		}
		if got := f.Status(); got.StateDigest != before.StateDigest {
			t.Errorf("%s with undecodable args changed the state", s.Kind)
		}
	}
}

// TestTxnAllows: the kinds a transaction may hold are the table's Txn rows.
func TestTxnAllows(t *testing.T) {
	var allowed []Kind
	for _, s := range commandTable {
		if TxnAllows(s.Kind) {
			allowed = append(allowed, s.Kind)
		}
	}
	want := []Kind{KindTaskCreate, KindTaskClaim, KindTaskUpdate, KindKVPut, KindKVDelete, KindRefSet}
	if !reflect.DeepEqual(allowed, want) {
		t.Errorf("transaction kinds: got %v, want %v (docs/api.md \"Transactions\")", allowed, want)
	}
	if TxnAllows(KindTxn) || TxnAllows("no.such.kind") {
		t.Errorf("TxnAllows: a transaction or an unknown kind is allowed in a transaction")
	}
}
