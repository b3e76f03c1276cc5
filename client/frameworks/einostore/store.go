// Package einostore keeps CloudWeGo Eino's graph checkpoints in Baton:
// Store implements compose.CheckPointStore (Eino v0.7), so that a graph
// interrupted in one process (compose.WithInterruptBeforeNodes,
// compose.Interrupt, ...) resumes in another, on any machine that reaches
// the cluster.
//
// Each Eino checkpoint id is a Baton thread (Options.Prefix + the id) of
// the store's tenant. Set appends a checkpoint at the head of the thread's
// default namespace, with the previous head as its parent; Get reads the
// head. A thread therefore keeps the history of its checkpoints: bound it
// with a retention policy on the prefix (keep_last, max_age_ms; see
// docs/frameworks.md) or call Delete when a run is over.
//
// Eino's checkpoints are bytes. Bytes that are JSON as the server answers
// it (compact, with <, > and & escaped: what json.Marshal writes) and
// that the server accepts are stored as JSON, readable in the console and
// the CLI; any other bytes as a base64 string. The checkpoint's metadata
// says which, and Get returns the bytes Set was given, either way. A
// checkpoint may be as large as the cluster's --max-checkpoint-bytes
// (16 MiB by default) once encoded: base64 makes 3 bytes 4, so about
// 12 MiB of bytes that are not JSON. A larger one fails Set with an error
// that wraps client.ErrTooLarge, and the thread keeps its previous
// checkpoint.
package einostore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/cloudwego/eino/compose"
	"github.com/google/uuid"

	"github.com/baton-dev/baton/client"
)

// Encodings of a checkpoint's data, named in its metadata's "encoding".
const (
	EncodingJSON   = "json"   // the data is the checkpoint's bytes
	EncodingBase64 = "base64" // the data is a JSON string of the bytes in base64
)

// Source is the metadata's "source" of the checkpoints Store writes.
const Source = "eino"

// maxHeadRetries bounds how many times Set follows a head that another
// writer moved (version_mismatch) before it gives up.
const maxHeadRetries = 16

// Options configures a Store; the zero value is usable.
type Options struct {
	// Prefix is put before every Eino checkpoint id to name its thread
	// ("eino/" keeps them apart from other threads, under one grant and
	// one retention policy). The thread id, Prefix included, is 1 to 256
	// bytes of UTF-8 without control characters.
	Prefix string
}

// Store is a compose.CheckPointStore on a Baton tenant's checkpoints. It
// is safe for concurrent use; it keeps no state of its own, so any number
// of processes may share the same threads.
type Store struct {
	c      *client.Client
	tenant string
	prefix string
}

var _ compose.CheckPointStore = (*Store)(nil)

// New returns a Store on tenant's checkpoints through c. The client's
// token needs a checkpoints grant on the threads (Options.Prefix):
// read for Get, write for Set, delete for Delete.
func New(c *client.Client, tenant string, opts Options) (*Store, error) {
	if c == nil {
		return nil, errors.New("einostore: nil client")
	}
	if tenant == "" {
		return nil, errors.New("einostore: empty tenant")
	}
	return &Store{c: c, tenant: tenant, prefix: opts.Prefix}, nil
}

// Thread is the Baton thread that holds checkpoint id.
func (s *Store) Thread(checkPointID string) string { return s.prefix + checkPointID }

// metadata is what Set writes in a checkpoint's metadata.
type metadata struct {
	Source   string `json:"source"`
	Encoding string `json:"encoding"`
}

// Get returns the latest checkpoint set for checkPointID; false (and no
// error) when none was.
func (s *Store) Get(ctx context.Context, checkPointID string) ([]byte, bool, error) {
	thread := s.Thread(checkPointID)
	cp, err := s.c.LatestCheckpoint(ctx, s.tenant, thread)
	if errors.Is(err, client.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("einostore: reading checkpoint %q (thread %q): %w", checkPointID, thread, err)
	}
	var md metadata
	if err := json.Unmarshal(cp.Metadata, &md); err != nil {
		return nil, false, fmt.Errorf("einostore: checkpoint %s of thread %q: metadata is not einostore's: %v", cp.CheckpointID, thread, err)
	}
	switch md.Encoding {
	case EncodingJSON:
		return []byte(cp.Data), true, nil
	case EncodingBase64:
		var b []byte
		if err := json.Unmarshal(cp.Data, &b); err != nil {
			return nil, false, fmt.Errorf("einostore: checkpoint %s of thread %q: data is not base64: %v", cp.CheckpointID, thread, err)
		}
		return b, true, nil
	default:
		return nil, false, fmt.Errorf("einostore: checkpoint %s of thread %q was not written by einostore (metadata encoding %q)", cp.CheckpointID, thread, md.Encoding)
	}
}

// Set stores checkPoint as the latest checkpoint of checkPointID: a new
// checkpoint at the head of its thread. When another writer moves the
// head meanwhile, Set writes on top of the new head (the last Set wins, as
// Eino expects of a store). Past the cluster's --max-checkpoint-bytes it
// fails with an error wrapping client.ErrTooLarge and stores nothing.
func (s *Store) Set(ctx context.Context, checkPointID string, checkPoint []byte) error {
	thread := s.Thread(checkPointID)
	data, enc, err := encode(checkPoint)
	if err != nil {
		return fmt.Errorf("einostore: encoding checkpoint %q: %w", checkPointID, err)
	}
	md, err := json.Marshal(metadata{Source: Source, Encoding: enc})
	if err != nil {
		return err
	}
	// A time-ordered id: the thread's checkpoints sort as they were set.
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("einostore: checkpoint id: %w", err)
	}
	// The first attempt guesses that the thread is new; if it is not, the
	// answer names its head, and the next attempt writes on top of it. A
	// thread that exists thus costs one more request, and no read of its
	// (possibly large) latest data.
	parent := ""
put:
	for range maxHeadRetries {
		_, err = s.c.PutCheckpoint(ctx, s.tenant, thread, id.String(), client.PutCheckpointRequest{
			ParentID: parent,
			Data:     data,
			Metadata: md,
		})
		var apiErr *client.Error
		switch {
		case errors.Is(err, client.ErrVersionMismatch) && errors.As(err, &apiErr):
			head, ok := apiErr.DetailString("current_head")
			if !ok || head == parent {
				break put
			}
			parent = head
		case errors.Is(err, client.ErrInvalidArgument) && enc == EncodingJSON:
			// JSON that the server's stricter reading refuses (a duplicate
			// member, a lone surrogate escape) goes as bytes.
			if data, err = json.Marshal(checkPoint); err != nil {
				return fmt.Errorf("einostore: encoding checkpoint %q: %w", checkPointID, err)
			}
			enc = EncodingBase64
			if md, err = json.Marshal(metadata{Source: Source, Encoding: enc}); err != nil {
				return err
			}
		default:
			break put
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrTooLarge):
		return fmt.Errorf("einostore: checkpoint %q is %d bytes (%d stored as %s): over the cluster's --max-checkpoint-bytes (16 MiB by default); nothing was stored: %w",
			checkPointID, len(checkPoint), len(data), enc, err)
	default:
		return fmt.Errorf("einostore: storing checkpoint %q (thread %q): %w", checkPointID, thread, err)
	}
}

// Delete deletes every checkpoint set for checkPointID (its thread), for a
// run that is over; deleting one that has none is not an error.
func (s *Store) Delete(ctx context.Context, checkPointID string) error {
	err := s.c.DeleteThread(ctx, s.tenant, s.Thread(checkPointID), nil)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("einostore: deleting checkpoint %q: %w", checkPointID, err)
	}
	return nil
}

// encode returns the checkpoint's data as Baton stores it: the bytes
// themselves when the server gives them back unchanged (JSON as
// json.Marshal writes it), a base64 JSON string otherwise.
func encode(b []byte) (json.RawMessage, string, error) {
	if b == nil {
		b = []byte{} // "", not null
	}
	if utf8.Valid(b) && json.Valid(b) {
		canon, err := json.Marshal(json.RawMessage(b))
		if err == nil && bytes.Equal(canon, b) {
			return b, EncodingJSON, nil
		}
	}
	data, err := json.Marshal(b)
	if err != nil {
		return nil, "", err
	}
	return data, EncodingBase64, nil
}
