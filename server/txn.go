package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// The body of each op (wire.TxnTaskCreate, wire.TxnKVPut, ...) is
// {"op": KIND, ...the body of that write...}; writes that name a task in
// their path take "task_id" in the body instead.

// txnOpDecoder validates one op and authorizes it; it returns the FSM args.
type txnOpDecoder func(s *Server, id *identity, tenant string, raw []byte) (any, error)

// txnOps maps the op kinds of docs/api.md to their decoders. Resources added later
// register theirs here.
var txnOps = map[string]struct {
	kind   fsm.Kind
	decode txnOpDecoder
}{
	"task.create": {fsm.KindTaskCreate, decodeTxnTaskCreate},
	"task.claim": {fsm.KindTaskClaim, txnTaskOp(func(op *wire.TxnTaskClaim) (string, *wire.TaskClaim) {
		return op.TaskID, &op.TaskClaim
	}, taskClaimArgs)},
	"task.update": {fsm.KindTaskUpdate, txnTaskOp(func(op *wire.TxnTaskUpdate) (string, *wire.TaskUpdate) {
		return op.TaskID, &op.TaskUpdate
	}, taskUpdateArgs)},
	"kv.put":    {fsm.KindKVPut, decodeTxnKVPut},
	"kv.delete": {fsm.KindKVDelete, decodeTxnKVDelete},
	"ref.set":   {fsm.KindRefSet, decodeTxnRefSet},
}

func decodeTxnRefSet(s *Server, id *identity, tenant string, raw []byte) (any, error) {
	var op wire.TxnRefSet
	if err := decodeStrict(raw, &op); err != nil {
		return nil, err
	}
	args, err := refSetArgs(&op.RefSet, op.Ref)
	if err != nil {
		return nil, err
	}
	if err := id.allow(tenant, resRefs, op.Ref, actWrite); err != nil {
		return nil, err
	}
	return args, s.mayReadArtifact(id, tenant, args.ArtifactID)
}

func decodeTxnKVPut(s *Server, id *identity, tenant string, raw []byte) (any, error) {
	var op wire.TxnKVPut
	if err := decodeStrict(raw, &op); err != nil {
		return nil, err
	}
	args, err := kvPutArgs(&op.KVPut, op.Namespace, op.Key)
	if err != nil {
		return nil, err
	}
	return args, id.allow(tenant, resKV, op.Namespace+"/"+op.Key, actWrite)
}

func decodeTxnKVDelete(s *Server, id *identity, tenant string, raw []byte) (any, error) {
	var op wire.TxnKVDelete
	if err := decodeStrict(raw, &op); err != nil {
		return nil, err
	}
	if err := validKV(op.Namespace, op.Key); err != nil {
		return nil, err
	}
	fence, err := fenceArg(op.Fence)
	if err != nil {
		return nil, err
	}
	args := &fsm.KVDeleteArgs{Namespace: op.Namespace, Key: op.Key, ExpectVersion: op.ExpectVersion, Fence: fence}
	return args, id.allow(tenant, resKV, op.Namespace+"/"+op.Key, actDelete)
}

func decodeTxnTaskCreate(s *Server, id *identity, tenant string, raw []byte) (any, error) {
	var op wire.TxnTaskCreate
	if err := decodeStrict(raw, &op); err != nil {
		return nil, err
	}
	args, err := taskCreateArgs(&op.TaskCreate)
	if err != nil {
		return nil, err
	}
	return args, id.allow(tenant, resTasks, args.Queue, actWrite)
}

// txnTaskOp is the decoder of an op on one existing task: it decodes the
// op (O, a wire type), splits it into the task id and the body of the
// equivalent single write, validates that into args and authorizes it on
// the task's queue.
func txnTaskOp[O any, R any, A any](split func(*O) (string, *R), argsOf func(*R, string) (A, error)) txnOpDecoder {
	return func(s *Server, id *identity, tenant string, raw []byte) (any, error) {
		var op O
		if err := decodeStrict(raw, &op); err != nil {
			return nil, err
		}
		taskID, req := split(&op)
		args, err := argsOf(req, taskID)
		if err != nil {
			return nil, err
		}
		_, err = s.authorizeTask(id, tenant, taskID, actWrite)
		return args, err
	}
}

// handleTxn applies several writes all or nothing. Each op is validated and
// authorized here; the FSM applies them in one command and rolls all back on
// the first failure, which it reports with op_index. A task created earlier
// in the same transaction is authorized by its queue when the FSM applies it.
func (s *Server) handleTxn(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.mayReach(id, tenant, []string{resTasks, resKV, resRefs}, actWrite, actDelete); err != nil {
		return err
	}
	var req wire.Txn
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if len(req.Ops) == 0 || len(req.Ops) > fsm.MaxTxnOps {
		return badRequest("ops must hold 1 to %d operations", fsm.MaxTxnOps)
	}
	args := &fsm.TxnArgs{Ops: make([]fsm.TxnOp, len(req.Ops))}
	created := map[int]string{} // op index -> task id of a task.create
	for i, raw := range req.Ops {
		op, a, err := s.decodeTxnOp(id, tenant, raw)
		if err != nil {
			// A retry of a transaction that was applied, whose task is
			// gone since, gets the first answer (see replayGone).
			if res, ok := s.replayKnown(r, id, tenant, fsm.KindTxn, body, err); ok {
				return reply(w, res, nil)
			}
			return opIndexed(err, i)
		}
		if tc, ok := a.(*fsm.TaskCreateArgs); ok {
			created[i] = tc.ID
		}
		args.Ops[i] = op
	}
	res, err := s.propose(r, id, tenant, fsm.KindTxn, args, body)
	if err != nil {
		return err
	}
	if res.Code == fsm.CodeAlreadyExists {
		var d struct {
			OpIndex *int `json:"op_index"`
		}
		if json.Unmarshal(res.Details, &d) == nil && d.OpIndex != nil {
			if taskID, ok := created[*d.OpIndex]; ok {
				if hidden := s.hideTaken(id, tenant, taskID, res); hidden != res {
					hidden.Details = res.Details
					res = hidden
				}
			}
		}
	}
	return reply(w, res, nil)
}

func (s *Server) decodeTxnOp(id *identity, tenant string, raw []byte) (fsm.TxnOp, any, error) {
	var head struct {
		Op string `json:"op"`
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&head); err != nil {
		return fsm.TxnOp{}, nil, badRequest("malformed op: %v", err)
	}
	entry, ok := txnOps[head.Op]
	if !ok {
		return fsm.TxnOp{}, nil, badRequest("unknown op %q", head.Op)
	}
	a, err := entry.decode(s, id, tenant, raw)
	if ae, ok := err.(*apiError); err != nil && (!ok || ae.Code != fsm.CodeNotFound) {
		return fsm.TxnOp{}, nil, err
	} // not found: a task made earlier in this transaction; the FSM decides
	return fsm.TxnOp{Kind: entry.kind, Args: fsm.EncodeArgs(a)}, a, nil
}

func opIndexed(err error, i int) error {
	ae, ok := err.(*apiError)
	if !ok {
		return err
	}
	out := *ae
	out.Details = map[string]any{"op_index": i}
	for k, v := range ae.Details {
		out.Details[k] = v
	}
	return &out
}
