package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// The checkpoint routes a LangGraph saver calls on every step (put, put
// writes, get, list) also speak application/msgpack (docs/api.md
// "Checkpoints in msgpack"): the same members as in JSON, where a member
// named b64 carries its bytes as msgpack bin instead of base64 text, and
// data, metadata and JSON write values are msgpack values of the JSON
// types. A request body is msgpack when its Content-Type says so; an
// answer is when the request's Accept names it. Errors stay JSON.
const mediaMsgpack = "application/msgpack"

// mpHandle decodes request bodies and encodes answers: str and bin kept
// apart, maps of any value decoded with string keys, and a member the
// body's struct does not have refused, as decodeStrict refuses it in
// JSON.
var mpHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true
	h.MapType = reflect.TypeOf(map[string]any(nil))
	h.ErrorIfNoField = true
	return h
}()

// isMsgpackBody reports whether the request's body is msgpack.
func isMsgpackBody(r *http.Request) bool {
	t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && t == mediaMsgpack
}

// wantsMsgpack reports whether the request's Accept names msgpack (with a
// q above 0).
func wantsMsgpack(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		t, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || t != mediaMsgpack {
			continue
		}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err != nil || f <= 0 {
				continue
			}
		}
		return true
	}
	return false
}

// decodeMsgpack decodes a whole body into v: one msgpack value, nothing
// after it.
func decodeMsgpack(body []byte, v any) error {
	if len(body) == 0 {
		return badRequest("request body is empty: want one msgpack map")
	}
	d := codec.NewDecoderBytes(body, mpHandle)
	if err := d.Decode(v); err != nil {
		return badRequest("request body is not the msgpack this route takes: %v", err)
	}
	var extra any
	if err := d.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("request body has bytes after its msgpack value")
	}
	return nil
}

// mpJSON turns a msgpack value (data, metadata, a write's value) into
// JSON: the JSON types only, so bin, ext and non-finite floats are
// refused (bytes go in blobs or in a write's type and b64).
func mpJSON(what string, v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if err := jsonTypesOnly(what, v, 0); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, badRequest("%s: %v", what, err)
	}
	return b, nil
}

// maxMsgpackDepth bounds the nesting of a msgpack value turned into JSON
// (the JSON decoder has its own).
const maxMsgpackDepth = 1000

func jsonTypesOnly(what string, v any, depth int) error {
	if depth > maxMsgpackDepth {
		return badRequest("%s nests deeper than %d", what, maxMsgpackDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int64, uint64, int, int8, int16, int32, uint, uint8, uint16, uint32:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return badRequest("%s holds a number JSON cannot (%v)", what, x)
		}
		return nil
	case float32:
		return jsonTypesOnly(what, float64(x), depth)
	case []any:
		for _, e := range x {
			if err := jsonTypesOnly(what, e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range x {
			if err := jsonTypesOnly(what, e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case []byte:
		return badRequest("%s holds bytes (msgpack bin): it must be a JSON value; send bytes as a blob or a write's type and b64", what)
	}
	return badRequest("%s holds a %T, which is not a JSON value", what, v)
}

// checkpointPutMP is wire.CheckpointPut in msgpack: data and metadata are
// values, not JSON texts.
type checkpointPutMP struct {
	ParentID     *string               `json:"parent_id,omitempty"`
	Data         any                   `json:"data,omitempty"`
	Metadata     any                   `json:"metadata,omitempty"`
	Fork         bool                  `json:"fork,omitempty"`
	Fence        *wire.Fence           `json:"fence,omitempty"`
	DataChunks   []wire.ChunkRef       `json:"data_chunks,omitempty"`
	BlobVersions map[string]string     `json:"blob_versions,omitempty"`
	Blobs        []wire.CheckpointBlob `json:"blobs,omitempty"`
}

// readCheckpointPut reads a put's body, JSON or msgpack, within the JSON
// body limit either way.
func (s *Server) readCheckpointPut(w http.ResponseWriter, r *http.Request) (*wire.CheckpointPut, []byte, error) {
	var req wire.CheckpointPut
	if !isMsgpackBody(r) {
		body, err := s.readJSON(w, r, &req)
		return &req, body, err
	}
	body, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return nil, nil, err
	}
	var mp checkpointPutMP
	if err := decodeMsgpack(body, &mp); err != nil {
		return nil, nil, err
	}
	req = wire.CheckpointPut{ParentID: mp.ParentID, Fork: mp.Fork, Fence: mp.Fence, DataChunks: mp.DataChunks,
		BlobVersions: mp.BlobVersions, Blobs: mp.Blobs}
	if req.Data, err = mpJSON("data", mp.Data); err != nil {
		return nil, nil, err
	}
	if req.Metadata, err = mpJSON("metadata", mp.Metadata); err != nil {
		return nil, nil, err
	}
	if mp.Data == nil && req.DataChunks == nil {
		req.Data = nil // refused below as missing, as in JSON
	}
	return &req, body, nil
}

// checkpointWriteMP is wire.CheckpointWrite in msgpack. Idx is read as
// any msgpack value and checked by mpInt64: the codec would wrap an
// unsigned integer past 2^63-1 into a negative int64 (LangGraph's
// special write indexes) instead of refusing it, as JSON does.
type checkpointWriteMP struct {
	Idx     any    `json:"idx,omitempty"`
	Channel string `json:"channel"`
	Value   any    `json:"value,omitempty"`
	Type    string `json:"type,omitempty"`
	Data    []byte `json:"b64,omitempty"`
}

type checkpointWritesMP struct {
	Writes   []checkpointWriteMP `json:"writes"`
	TaskPath string              `json:"task_path,omitempty"`
	Fence    *wire.Fence         `json:"fence,omitempty"`
}

// readCheckpointWrites reads a put-writes body, JSON or msgpack.
func (s *Server) readCheckpointWrites(w http.ResponseWriter, r *http.Request) (*wire.CheckpointWrites, []byte, error) {
	var req wire.CheckpointWrites
	if !isMsgpackBody(r) {
		body, err := s.readJSON(w, r, &req)
		return &req, body, err
	}
	body, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return nil, nil, err
	}
	var mp checkpointWritesMP
	if err := decodeMsgpack(body, &mp); err != nil {
		return nil, nil, err
	}
	req = wire.CheckpointWrites{TaskPath: mp.TaskPath, Fence: mp.Fence}
	if mp.Writes != nil {
		req.Writes = make([]wire.CheckpointWrite, len(mp.Writes))
	}
	for i, wr := range mp.Writes {
		v, err := mpJSON("writes["+strconv.Itoa(i)+"].value", wr.Value)
		if err != nil {
			return nil, nil, err
		}
		idx, err := mpInt64("writes["+strconv.Itoa(i)+"].idx", wr.Idx)
		if err != nil {
			return nil, nil, err
		}
		req.Writes[i] = wire.CheckpointWrite{Idx: idx, Channel: wr.Channel, Value: v, Type: wr.Type, Data: wr.Data}
	}
	return &req, body, nil
}

// mpInt64 is an optional integer member of a msgpack body (nil: absent):
// a msgpack integer within int64, anything else refused.
func mpInt64(what string, v any) (*int64, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		return &x, nil
	case uint64:
		if x <= math.MaxInt64 {
			n := int64(x)
			return &n, nil
		}
		return nil, badRequest("%s must be an integer from %d to %d, not %d", what, int64(math.MinInt64), int64(math.MaxInt64), x)
	}
	return nil, badRequest("%s must be an integer, not a %T", what, v)
}

// writeMsgpack answers v in msgpack.
func writeMsgpack(w http.ResponseWriter, status int, index uint64, v any) error {
	var b []byte
	if err := codec.NewEncoderBytes(&b, mpHandle).Encode(v); err != nil {
		return fmt.Errorf("encoding a msgpack answer: %w", err)
	}
	setIndex(w, index)
	w.Header().Set("Content-Type", mediaMsgpack)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	return nil
}

// jsonValue is a JSON text as a msgpack value: integers stay integers.
func jsonValue(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	}
	return v
}

// checkpointMP is a checkpoint answer in msgpack (fsm.CheckpointView's
// JSON, member for member).
type checkpointMP struct {
	ThreadID      string           `json:"thread_id"`
	NS            string           `json:"checkpoint_ns,omitempty"`
	CheckpointID  string           `json:"checkpoint_id"`
	ParentID      string           `json:"parent_id"`
	Data          any              `json:"data"`
	Metadata      any              `json:"metadata"`
	CreatedAt     string           `json:"created_at"`
	DataChunks    []fsm.ChunkRef   `json:"data_chunks,omitempty"`
	ExpiresAt     string           `json:"expires_at,omitempty"`
	Blobs         []fsm.BlobView   `json:"blobs,omitempty"`
	PendingWrites []map[string]any `json:"pending_writes,omitempty"`
}

func checkpointMsgpack(v *fsm.CheckpointView) (*checkpointMP, error) {
	c := v.Checkpoint
	out := &checkpointMP{ThreadID: c.Thread, NS: c.NS, CheckpointID: c.ID, ParentID: c.ParentID,
		CreatedAt: fsm.FormatMillis(c.CreatedAt), DataChunks: c.Chunks, Blobs: v.Blobs}
	if c.ExpiresAt != 0 {
		out.ExpiresAt = fsm.FormatMillis(c.ExpiresAt)
	}
	var err error
	if out.Data, err = jsonValue(c.Data); err != nil {
		return nil, err
	}
	if out.Metadata, err = jsonValue(c.Metadata); err != nil {
		return nil, err
	}
	if out.Metadata == nil {
		out.Metadata = map[string]any{}
	}
	if out.PendingWrites, err = pendingWritesMsgpack(v.Pending); err != nil {
		return nil, err
	}
	return out, nil
}

func pendingWritesMsgpack(ws []fsm.PendingWrite) ([]map[string]any, error) {
	if ws == nil {
		return nil, nil
	}
	out := make([]map[string]any, len(ws))
	for i, pw := range ws {
		m := map[string]any{"task_id": pw.TaskID, "idx": pw.Idx, "channel": pw.Channel}
		if pw.TaskPath != "" {
			m["task_path"] = pw.TaskPath
		}
		if pw.Type != "" {
			m["type"], m["b64"] = pw.Type, pw.Bytes
		} else {
			v, err := jsonValue(pw.Value)
			if err != nil {
				return nil, err
			}
			m["value"] = v
		}
		out[i] = m
	}
	return out, nil
}

// replyCheckpoint answers a command's result: in msgpack when asked for
// and it succeeded (the result, kept as JSON for retries, is read back
// into its shape), else as reply does.
func replyCheckpoint(w http.ResponseWriter, r *http.Request, res *fsm.Result, writes bool) error {
	if !wantsMsgpack(r) || !res.OK() || res.Outcome == fsm.OutcomeNoContent {
		return reply(w, res, nil)
	}
	if res.Replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	status := map[fsm.Outcome]int{fsm.OutcomeOK: 200, fsm.OutcomeCreated: 201}[res.Outcome]
	if writes {
		var tw struct {
			TaskID string             `json:"task_id"`
			Writes []fsm.PendingWrite `json:"writes"`
		}
		if err := json.Unmarshal(res.JSON(), &tw); err != nil {
			return err
		}
		ws, err := pendingWritesMsgpack(tw.Writes)
		if err != nil {
			return err
		}
		if ws == nil {
			ws = []map[string]any{}
		}
		return writeMsgpack(w, status, res.Index, map[string]any{"task_id": tw.TaskID, "writes": ws})
	}
	v, err := jsonValue(res.JSON())
	if err != nil {
		return err
	}
	return writeMsgpack(w, status, res.Index, v)
}

// readReplyCheckpoints answers a read of checkpoints: in msgpack when
// asked for, else JSON.
func (s *Server) readReplyCheckpoints(w http.ResponseWriter, r *http.Request, index uint64, list []fsm.CheckpointView, next string, one bool) error {
	if !wantsMsgpack(r) {
		if one {
			return s.readReply(w, index, &list[0])
		}
		answer := map[string]any{"checkpoints": list}
		if next != "" {
			answer["next_page_token"] = next
		}
		return s.readReply(w, index, answer)
	}
	cps := make([]*checkpointMP, len(list))
	for i := range list {
		var err error
		if cps[i], err = checkpointMsgpack(&list[i]); err != nil {
			return err
		}
	}
	if one {
		return writeMsgpack(w, http.StatusOK, index, cps[0])
	}
	answer := map[string]any{"checkpoints": cps}
	if next != "" {
		answer["next_page_token"] = next
	}
	return writeMsgpack(w, http.StatusOK, index, answer)
}
