package fsm

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// KindTxn applies several operations all or nothing.
const KindTxn Kind = "txn"

// MaxTxnOps bounds the operations of one transaction.
const MaxTxnOps = 128

// TxnArgs is a transaction: each op is a command kind with its args.
type TxnArgs struct {
	Ops []TxnOp
}

// TxnOp is one operation of a transaction.
type TxnOp struct {
	Kind Kind
	Args []byte
}

// entryVersion of a transaction: the latest its ops need, by kind
// (commandSpec.Since) or by the fields their args set (entryVersioner).
func (a *TxnArgs) entryVersion() byte {
	var v byte
	for _, op := range a.Ops {
		v = max(v, kindSince[op.Kind])
		if t, ok := argTypes[op.Kind]; ok && t.Implements(entryVersionerType) {
			args := reflect.New(t.Elem()).Interface()
			if decode(op.Args, args) == nil {
				v = max(v, args.(entryVersioner).entryVersion())
			}
		}
	}
	return v
}

// applyTxn runs the ops in order on the live state. On the first failure it
// returns that op's error with op_index; applyCommand then rolls the whole
// state back to before the transaction, so nothing of it is applied.
func applyTxn(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TxnArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if len(a.Ops) == 0 || len(a.Ops) > MaxTxnOps {
		return fail(CodeInvalidArgument, fmt.Sprintf("a transaction has 1 to %d ops, not %d", MaxTxnOps, len(a.Ops)), nil)
	}
	results := make([]any, len(a.Ops))
	for i, op := range a.Ops {
		if !txnKinds[op.Kind] {
			return withOpIndex(fail(CodeInvalidArgument, fmt.Sprintf("op kind %q is not allowed in a transaction", op.Kind), nil), i)
		}
		sub := &Command{Kind: op.Kind, Now: c.Now, Tenant: c.Tenant, Principal: c.Principal, Args: op.Args, ver: c.ver}
		r := f.dispatch(ctx, sub)
		if !r.OK() {
			return withOpIndex(r, i)
		}
		results[i] = r.Obj // nil (a queue claim that found nothing) encodes as null
	}
	return okValue(OutcomeOK, map[string]any{"results": results})
}

func withOpIndex(r *Result, i int) *Result {
	details := map[string]any{}
	if len(r.Details) > 0 {
		_ = json.Unmarshal(r.Details, &details)
	}
	details["op_index"] = i
	r.Details = mustJSON(details)
	r.Message = fmt.Sprintf("op %d: %s", i, r.Message)
	return r
}
