// Package logstore keeps each tool attempt's log (stderr while the tool
// runs, then stdout and the failure line when the attempt failed) in an
// object store, so `agentctl logs` on any machine that reaches the store
// shows a running step's lines and the log outlives the sandbox. One
// abstraction for a local directory and S3: objstore.Store.
//
// Layout, per attempt (segments escaped, see escape):
//
//	<agent>/<run>/<step>/<attempt>/<seq>.<writer>.chunk   seq zero-padded (000000…), writer a 16-hex nonce
//	<agent>/<run>/<step>/<attempt>/end                    JSON (endMarker), written last
//
// A Writer (Open) stores what it is given as numbered chunks at least every
// FlushInterval, each Put IfAbsent, and Close writes the end marker: an
// attempt without one is still running (or its worker died).
//
// Re-delivery (activities are at-least-once, so two deliveries of one
// attempt may write the same key): the latest Open wins. Open deletes
// what is stored under the key and writes its chunk 0 at once; readers take
// the writer whose chunk 0 is newest (the end marker's writer when that
// still has its chunk 0), ignore the others' chunks with a note, and a
// writer that finds its chunk 0 gone at Close writes no end marker
// (ErrSuperseded). Two writers are never interleaved.
//
// Readers do not trust the store (a shared bucket can be written by
// others): names that are not chunk names are ignored, a chunk over
// MaxChunkBytes is replaced by a note, at most MaxChunks per attempt and
// MaxReadBytes per Read are taken, and the end marker is schema-checked.
//
// Logs of earlier versions (<agent>/<run>/<step>/<attempt>.log, one object
// per attempt) are still listed and read, as finished attempts.
package logstore

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/objstore"
)

// DefaultDir is the worker's and agentctl's default log directory.
const DefaultDir = ".data/logs"

// Defaults and bounds.
const (
	// DefaultFlushInterval: the issue asks for a running tool's stderr to
	// reach the store "at least every few seconds"; 2 s matches the
	// heartbeat interval, so a -f reader lags the tool by about that.
	DefaultFlushInterval = 2 * time.Second
	// DefaultChunkBytes cuts a chunk early when that much is buffered.
	DefaultChunkBytes = 256 << 10
	// DefaultMaxBuffered bounds what a Writer holds while the store is
	// unreachable; more is dropped (with a note in the log).
	DefaultMaxBuffered = 8 << 20
	// DefaultOpTimeout bounds one store operation of a Writer.
	DefaultOpTimeout = 10 * time.Second

	// MaxChunkBytes is the largest chunk a reader accepts (a Writer never
	// writes more than ChunkBytes, capped to this).
	MaxChunkBytes = 1 << 20
	// MaxChunks is the most chunks of one attempt a reader takes (and a
	// Writer writes): at one chunk per 2 s, over two days of a chatty tool.
	MaxChunks = 100_000
	// MaxReadBytes bounds Read's result (a tail read takes the last bytes).
	MaxReadBytes = 64 << 20
	// maxAttemptObjects bounds what a reader takes from one attempt's
	// prefix: its chunks, the end marker and room for a superseded
	// delivery's leftovers.
	maxAttemptObjects = 2*MaxChunks + 16
	// maxEndBytes bounds the end marker a reader decodes.
	maxEndBytes = 16 << 10
	// seqDigits pads chunk numbers so the store's key order is seq order.
	seqDigits = 6
)

var (
	// ErrNotFound: nothing is stored for the key.
	ErrNotFound = errors.New("log not found")
	// ErrSuperseded: a later delivery of the same attempt opened the key;
	// this Writer's log is ignored by readers and it wrote no end marker.
	ErrSuperseded = errors.New("log superseded by a later delivery of the attempt")
	// ErrClosed: Write after Close.
	ErrClosed = errors.New("log writer closed")
	// ErrStopped: Follow's Stop said to give up before the end marker.
	ErrStopped = errors.New("follow stopped before the attempt's end")
)

// Key names one attempt's log.
type Key struct {
	AgentID string `json:"agent_id"`
	RunID   string `json:"run_id"`
	StepID  string `json:"step_id"`
	Attempt int32  `json:"attempt"`
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%s/%d", k.AgentID, k.RunID, k.StepID, k.Attempt)
}

func (k Key) validate() error {
	if k.AgentID == "" || k.RunID == "" || k.StepID == "" || k.Attempt < 1 {
		return fmt.Errorf("invalid log key %s: agent, run, step and attempt >= 1 are required", k)
	}
	if err := objstore.CheckKey(k.prefix() + "/" + chunkName(0, strings.Repeat("0", nonceLen))); err != nil {
		return fmt.Errorf("invalid log key %s: %w", k, err)
	}
	return nil
}

// prefix is the attempt's directory: <agent>/<run>/<step>/<attempt>.
func (k Key) prefix() string {
	return escape(k.AgentID) + "/" + escape(k.RunID) + "/" + escape(k.StepID) + "/" + strconv.Itoa(int(k.Attempt))
}

// legacyKey is where versions before chunked logs kept the whole log.
func (k Key) legacyKey() string {
	return escape(k.AgentID) + "/" + escape(k.RunID) + "/" + escape(k.StepID) + "/" + strconv.Itoa(int(k.Attempt)) + ".log"
}

// Entry is one attempt's stored log.
type Entry struct {
	Key Key `json:"key"`
	// Size is the stored bytes of the attempt's current writer.
	Size int64 `json:"size"`
	// ModTime is the time of the attempt's latest object.
	ModTime time.Time `json:"mod_time"`
	// Finished: the end marker exists (or the log is of an earlier
	// version, written whole at the end).
	Finished bool `json:"finished"`
}

// Options tune a Store; zero values take the defaults above.
type Options struct {
	FlushInterval time.Duration
	ChunkBytes    int
	MaxBuffered   int
	OpTimeout     time.Duration
	// Logger receives a Writer's store problems (logs are best effort: a
	// store outage never fails the attempt, but the operator hears of it).
	Logger *slog.Logger
}

// Store reads and writes attempt logs in an object store. Safe for
// concurrent use.
type Store struct {
	s    objstore.Store
	opts Options
	log  *slog.Logger
}

// New returns a log store over s (typically objstore.Sub(root, "logs")).
func New(s objstore.Store, opts Options) *Store {
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.ChunkBytes <= 0 || opts.ChunkBytes > MaxChunkBytes {
		opts.ChunkBytes = min(DefaultChunkBytes, MaxChunkBytes)
	}
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = DefaultMaxBuffered
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{s: s, opts: opts, log: log}
}

// String names the underlying store for messages.
func (s *Store) String() string { return s.s.String() }

// Find picks the logs of one step from List's result: runID "" means the
// run that logged last for the step, attempt 0 means every attempt of it.
// Entries are returned in attempt order.
func Find(entries []Entry, runID, stepID string, attempt int32) []Entry {
	if runID == "" {
		for _, e := range entries { // oldest first: the last match is the latest run
			if e.Key.StepID == stepID {
				runID = e.Key.RunID
			}
		}
	}
	var out []Entry
	for _, e := range entries {
		if e.Key.StepID == stepID && e.Key.RunID == runID && (attempt == 0 || e.Key.Attempt == attempt) {
			out = append(out, e)
		}
	}
	sortByAttempt(out)
	return out
}

// TailLines keeps the last n lines of data (n <= 0: all).
func TailLines(data []byte, n int) []byte {
	if n <= 0 {
		return data
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	i := end
	for count := 0; i > 0; i-- {
		if data[i-1] == '\n' {
			count++
			if count == n {
				break
			}
		}
	}
	return data[i:]
}

// escape and unescape are the one key-segment rule (objstore): the
// output always passes objstore.CheckKey and distinct IDs never share a
// prefix.
func escape(s string) string   { return objstore.EscapeSegment(s) }
func unescape(s string) string { return objstore.UnescapeSegment(s) }

// Prefix is where logs live in a worker's root object store (next to
// "checkpoints" and "results"; see the store layout in docs).
const Prefix = "logs"

// OnRoot is the log store of a root object store (--store): its Prefix.
func OnRoot(root objstore.Store, opts Options) *Store { return New(objstore.Sub(root, Prefix), opts) }

// NewDir is the local-directory log store (no --store): the directory is
// the log store itself, as in earlier versions. close releases it.
func NewDir(dir string, opts Options) (s *Store, close func() error, err error) {
	d, err := objstore.NewDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("log store: %w", err)
	}
	return New(d, opts), d.Close, nil
}
