// Package attemptrec keeps the signed record of every successful step
// attempt in an object store, so a result survives the loss of its
// completion report (a Temporal outage longer than the heartbeat timeout,
// a worker that dies between finishing and reporting): the next attempt of
// the same step finds the record and adopts it instead of running the tool
// again.
//
// The store is shared and not trusted (a bucket may be written by someone
// else): every record is HMAC-signed with the worker's checkpoint keyring
// under its own domain string, verified on read, and bound to the key it
// is stored under (agent, run, step, attempt), so a bucket writer can
// neither inject an output nor move a real record to another step.
package attemptrec

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/objstore"
)

// Domain is the signing domain of attempt records: a MAC over a record
// never verifies as a checkpoint manifest's, or the other way round.
const Domain = "agentflow attempt result v1"

// SchemaVersion is the record format written and accepted.
const SchemaVersion = 1

// Keys signs and verifies (checkpoint.Keyring).
type Keys interface {
	Sign(domain string, msg []byte) (keyID, mac string)
	Verify(domain string, msg []byte, keyID, mac string) error
}

// ErrInvalidRecord: a stored object is not a record this worker can trust
// (unparsable, unsigned, wrong MAC or key, stored under another attempt's
// key, over the size bound). Callers ignore such a record and log why.
var ErrInvalidRecord = errors.New("invalid attempt record")

// Record is one successful attempt: what the step produced and where its
// workspace was checkpointed.
type Record struct {
	Schema  int    `json:"schema"`
	AgentID string `json:"agent_id"`
	RunID   string `json:"run_id"`
	StepID  string `json:"step_id"`
	Attempt int32  `json:"attempt"`
	// Image is the image reference of the request (digest-pinned);
	// ImageDigest what the host ran it as.
	Image        string          `json:"image"`
	ImageDigest  string          `json:"image_digest,omitempty"`
	CheckpointID string          `json:"checkpoint_id"`
	Output       json.RawMessage `json:"output"`
	OutputBytes  int             `json:"output_bytes"`
	Worker       string          `json:"worker,omitempty"`
	FinishedAt   time.Time       `json:"finished_at"`
}

// envelope is the stored form: the record's exact bytes and their MAC, so
// verification never depends on re-encoding.
type envelope struct {
	Record json.RawMessage `json:"record"`
	KeyID  string          `json:"key_id"`
	MAC    string          `json:"mac"`
}

// DefaultMaxBytes bounds a stored record read back (an output within the
// default inline limit, JSON-escaped, plus the fields).
const DefaultMaxBytes = 2 << 20

// Store reads and writes records under an object store (the worker's
// "results" store).
type Store struct {
	objs     objstore.Store
	keys     Keys
	maxBytes int64
}

// New returns a Store; maxBytes <= 0 is DefaultMaxBytes.
func New(objs objstore.Store, keys Keys, maxBytes int64) (*Store, error) {
	if objs == nil || keys == nil {
		return nil, errors.New("attempt records: object store and keys are required")
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{objs: objs, keys: keys, maxBytes: maxBytes}, nil
}

// String names the underlying store, for messages.
func (s *Store) String() string { return s.objs.String() }

// StepPrefix is the key prefix of every attempt of one step, ending in '/'.
func StepPrefix(agentID, runID, stepID string) string {
	return Segment(agentID) + "/" + Segment(runID) + "/" + Segment(stepID) + "/"
}

// Key is where attempt's record lives: <agent>/<run>/<step>/<attempt>.json.
func Key(agentID, runID, stepID string, attempt int32) string {
	return StepPrefix(agentID, runID, stepID) + strconv.Itoa(int(attempt)) + ".json"
}

// Segment escapes one key segment (objstore.EscapeSegment, the one rule).
func Segment(s string) string { return objstore.EscapeSegment(s) }

// Put signs rec and stores it under its key, only if no record is there
// yet (objstore.ErrExists otherwise: an attempt number is written once).
// A store failure matches objstore.ErrUnavailable.
func (s *Store) Put(ctx context.Context, rec Record) error {
	rec.Schema = SchemaVersion
	if err := checkIdentity(rec); err != nil {
		return err
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode attempt record: %w", err)
	}
	keyID, mac := s.keys.Sign(Domain, body)
	data, err := json.Marshal(envelope{Record: body, KeyID: keyID, MAC: mac})
	if err != nil {
		return fmt.Errorf("encode attempt record: %w", err)
	}
	key := Key(rec.AgentID, rec.RunID, rec.StepID, rec.Attempt)
	if _, err := s.objs.Put(ctx, key, bytes.NewReader(data), objstore.PutOptions{IfAbsent: true, Size: int64(len(data))}); err != nil {
		return fmt.Errorf("store attempt record %s in %s: %w", key, s.objs, err)
	}
	return nil
}

// Entry is one object found under a step's prefix: its attempt number (from
// the key) and either the verified Record or why it is not trusted
// (Err matches ErrInvalidRecord).
type Entry struct {
	Key     string
	Attempt int32
	Record  *Record
	Err     error
}

// List reads the records of one step's attempts 1..maxAttempt, sorted by
// attempt (only those are read: whatever else a bucket writer put under
// the prefix costs a listing, not a download). Objects that are not
// records of this step (bad signatures, records moved from another key)
// come back as entries with Err set; a failure of the store itself is the
// returned error (matching objstore.ErrUnavailable when the store is down).
func (s *Store) List(ctx context.Context, agentID, runID, stepID string, maxAttempt int32) ([]Entry, error) {
	prefix := StepPrefix(agentID, runID, stepID)
	infos, err := s.objs.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list attempt records %s in %s: %w", prefix, s.objs, err)
	}
	var out []Entry
	for _, info := range infos {
		name := strings.TrimPrefix(info.Key, prefix)
		n, ok := attemptOf(name)
		if !ok || n > maxAttempt {
			continue // not a record name (nested keys, other files), or not asked for
		}
		e := Entry{Key: info.Key, Attempt: n}
		rec, err := s.read(ctx, info)
		switch {
		case errors.Is(err, ErrInvalidRecord):
			e.Err = err
		case errors.Is(err, objstore.ErrNotFound):
			continue // deleted since the listing
		case err != nil:
			return nil, err
		default:
			want := Record{AgentID: agentID, RunID: runID, StepID: stepID, Attempt: n}
			if rec.AgentID != want.AgentID || rec.RunID != want.RunID || rec.StepID != want.StepID || rec.Attempt != want.Attempt {
				e.Err = fmt.Errorf("%w: %s holds the record of agent %q run %q step %q attempt %d",
					ErrInvalidRecord, info.Key, rec.AgentID, rec.RunID, rec.StepID, rec.Attempt)
			} else {
				e.Record = rec
			}
		}
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

func (s *Store) read(ctx context.Context, info objstore.Info) (*Record, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidRecord, info.Key, fmt.Sprintf(format, args...))
	}
	if info.Size > s.maxBytes {
		return nil, invalid("%d bytes, over the bound of %d", info.Size, s.maxBytes)
	}
	rc, err := s.objs.Get(ctx, info.Key)
	if err != nil {
		return nil, fmt.Errorf("read attempt record %s in %s: %w", info.Key, s.objs, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, s.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read attempt record %s in %s: %w", info.Key, s.objs, err)
	}
	if int64(len(data)) > s.maxBytes {
		return nil, invalid("over the bound of %d bytes", s.maxBytes)
	}
	var env envelope
	if err := strictDecode(data, &env); err != nil {
		return nil, invalid("not a signed record: %v", err)
	}
	if err := s.keys.Verify(Domain, env.Record, env.KeyID, env.MAC); err != nil {
		return nil, invalid("%v", err)
	}
	var rec Record
	if err := strictDecode(env.Record, &rec); err != nil {
		return nil, invalid("signed but unreadable: %v", err)
	}
	if rec.Schema != SchemaVersion {
		return nil, invalid("schema %d, want %d", rec.Schema, SchemaVersion)
	}
	if err := checkIdentity(rec); err != nil {
		return nil, invalid("%v", err)
	}
	return &rec, nil
}

// checkIdentity: the fields that make a record usable at all.
func checkIdentity(rec Record) error {
	switch {
	case rec.AgentID == "" || rec.RunID == "" || rec.StepID == "":
		return errors.New("attempt record needs agent, run and step")
	case rec.Attempt < 1:
		return fmt.Errorf("attempt record has attempt %d", rec.Attempt)
	case rec.CheckpointID == "":
		return errors.New("attempt record has no checkpoint")
	case len(rec.Output) == 0:
		return errors.New("attempt record has no output")
	}
	return nil
}

// strictDecode decodes exactly one JSON value with no unknown fields.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// attemptOf parses "<n>.json" (n a canonical positive decimal).
func attemptOf(name string) (int32, bool) {
	num, ok := strings.CutSuffix(name, ".json")
	if !ok || num == "" || num[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 32)
	if err != nil || n < 1 {
		return 0, false
	}
	return int32(n), true
}

func sortEntries(es []Entry) {
	slices.SortStableFunc(es, func(a, b Entry) int { return cmp.Compare(a.Attempt, b.Attempt) })
}
