package fsm

import (
	"errors"
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

// TestRandomLogCoversEveryKind: the random logs of the determinism and
// snapshot tests (randomLog, seeds 0 to 4 as in TestSameLogSameState)
// make every kind of the command table; applied, every kind succeeds in
// them and every kind a transaction may hold is in a transaction that
// succeeds. randomLog derives commands of every kind of the table from
// its args type (derivedlog_test.go), so a kind added to the table passes
// without a hand-made case where some of its derived commands succeed;
// one whose derived commands never do fails until logGen.command has a
// case for it.
func TestRandomLogCoversEveryKind(t *testing.T) {
	made, applied, inTxn := map[Kind]int{}, map[Kind]int{}, map[Kind]int{}
	for seed := range uint64(5) {
		f := New()
		for _, l := range randomLog(seed, 300) {
			cmds, err := DecodeEntry(l.Data)
			if err != nil {
				t.Fatal(err)
			}
			count(t, cmds, f.Apply(l), made, applied, inTxn)
		}
	}
	for _, s := range commandTable {
		switch {
		case made[s.Kind] == 0:
			t.Errorf("randomLog never makes a %s command: add the kind to logGen.command", s.Kind)
		case applied[s.Kind] == 0:
			t.Errorf("randomLog's %d %s commands all fail: make some that succeed (a case in logGen.command, "+
				"or wider domains in derivedlog_test.go)", made[s.Kind], s.Kind)
		case s.Txn && inTxn[s.Kind] == 0:
			t.Errorf("randomLog has no successful transaction with a %s op: add it to logGen.txnOps", s.Kind)
		}
	}
	t.Logf("commands made / applied: %v / %v", made, applied)
}

// count adds an entry's commands to the kinds made, applied (succeeded,
// not replayed) and applied within a transaction.
func count(t *testing.T, cmds []*Command, out any, made, applied, inTxn map[Kind]int) {
	t.Helper()
	res, _ := out.([]*Result)
	for i, c := range cmds {
		made[c.Kind]++
		if !res[i].OK() || res[i].Replay {
			continue
		}
		applied[c.Kind]++
		if c.Kind == KindTxn {
			var a TxnArgs
			if err := decode(c.Args, &a); err != nil {
				t.Fatal(err)
			}
			for _, op := range a.Ops {
				inTxn[op.Kind]++
			}
		}
	}
}

// TestCommandTableSince: a kind the table says is newer than the first
// entry version goes in an entry of at least its version, alone, beside a
// plain command and inside a transaction, and an older entry holding it
// is refused, so a member that predates the kind never applies it.
func TestCommandTableSince(t *testing.T) {
	plain := NewCommand(KindKVPut, 1, "acme", "", &KVPutArgs{Namespace: "n", Key: "k", Value: []byte("1")})
	if e := EncodeEntry([]*Command{plain}); e[0] != EntryVersion {
		t.Fatalf("a plain kv.put: entry version %d, want %d", e[0], EntryVersion)
	}
	gated := 0
	for _, s := range commandTable {
		if s.Since <= EntryVersion {
			continue
		}
		gated++
		args := reflect.New(reflect.TypeOf(s.Args)).Interface()
		c := NewCommand(s.Kind, 1, "acme", "", args)
		entries := map[string][]byte{
			"alone":         EncodeEntry([]*Command{c}),
			"beside kv.put": EncodeEntry([]*Command{plain, c}),
		}
		if s.Txn {
			entries["in a txn"] = EncodeEntry([]*Command{NewCommand(KindTxn, 1, "acme", "", &TxnArgs{Ops: []TxnOp{{Kind: s.Kind, Args: EncodeArgs(args)}}})})
		}
		for name, e := range entries {
			if e[0] < s.Since {
				t.Errorf("%s %s: entry version %d, want at least %d", s.Kind, name, e[0], s.Since)
			}
		}
		old := append([]byte{s.Since - 1}, EncodeEntry([]*Command{c})[1:]...)
		if _, err := DecodeEntry(old); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s in a version %d entry: %v, want ErrBadEntry", s.Kind, s.Since-1, err)
		}
	}
	if gated == 0 {
		t.Fatal("no kind in the table has Since set; the lifecycle kinds should")
	}
}
