// Package logstore keeps each tool attempt's log (stderr, plus stdout when
// the attempt failed) so `agentctl logs` can show it after the sandbox is
// gone. The default store is a local directory:
//
//	<root>/<agent_id>/<run_id>/<step_id>/<attempt>.log
//
// Path components are escaped (see escape) so any workflow ID is safe as a
// directory name. Scaled out, an S3-compatible store implements Store with
// the same keys.
package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultDir is the worker's and agentctl's default log directory.
const DefaultDir = ".data/logs"

// ErrNotFound: no log for the key.
var ErrNotFound = errors.New("log not found")

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
	return nil
}

// Entry is one stored log.
type Entry struct {
	Key     Key       `json:"key"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// Store keeps attempt logs. Implementations are safe for concurrent use.
// Write replaces an existing log for the same key: activities are
// at-least-once, and a re-delivered attempt's log supersedes the lost one.
type Store interface {
	Write(ctx context.Context, key Key, data []byte) error
	// Read returns the whole log, or only its last tail bytes when tail > 0.
	Read(ctx context.Context, key Key, tail int64) ([]byte, error)
	// List returns every log of an agent, oldest first.
	List(ctx context.Context, agentID string) ([]Entry, error)
}

// Dir is the local-directory Store.
type Dir struct {
	Root string
}

// NewDir returns a store rooted at root (created on first write).
func NewDir(root string) *Dir { return &Dir{Root: root} }

// Path is where key's log lives under root. agentctl uses it (through
// Dir.Read) so writer and reader agree on one layout.
func Path(root string, key Key) string {
	return filepath.Join(root, escape(key.AgentID), escape(key.RunID), escape(key.StepID),
		strconv.Itoa(int(key.Attempt))+".log")
}

// Write implements Store atomically (temp file + rename), so a reader
// following the log never sees a half-written file.
func (d *Dir) Write(_ context.Context, key Key, data []byte) error {
	if err := key.validate(); err != nil {
		return err
	}
	p := Path(d.Root, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return fmt.Errorf("write log %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write log %s: %w", key, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write log %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write log %s: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write log %s: %w", key, err)
	}
	return nil
}

// Read implements Store.
func (d *Dir) Read(_ context.Context, key Key, tail int64) ([]byte, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	f, err := os.Open(Path(d.Root, key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("read log %s: %w", key, err)
	}
	defer f.Close()
	if tail > 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("read log %s: %w", key, err)
		}
		if st.Size() > tail {
			if _, err := f.Seek(st.Size()-tail, io.SeekStart); err != nil {
				return nil, fmt.Errorf("read log %s: %w", key, err)
			}
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read log %s: %w", key, err)
	}
	return data, nil
}

// List implements Store. An agent without logs yields an empty list.
func (d *Dir) List(_ context.Context, agentID string) ([]Entry, error) {
	agentDir := filepath.Join(d.Root, escape(agentID))
	var out []Entry
	err := filepath.WalkDir(agentDir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == agentDir {
				return fs.SkipAll
			}
			return err
		}
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".log") {
			return nil
		}
		rel, err := filepath.Rel(agentDir, p)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 3 {
			return nil
		}
		attempt, err := strconv.Atoi(strings.TrimSuffix(parts[2], ".log"))
		if err != nil || attempt < 1 {
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		out = append(out, Entry{
			Key:     Key{AgentID: agentID, RunID: unescape(parts[0]), StepID: unescape(parts[1]), Attempt: int32(attempt)},
			Size:    info.Size(),
			ModTime: info.ModTime(),
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list logs of %s: %w", agentID, err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].ModTime.Equal(out[j].ModTime) {
			return out[i].ModTime.Before(out[j].ModTime)
		}
		return out[i].Key.String() < out[j].Key.String()
	})
	return out, nil
}

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
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key.Attempt < out[j].Key.Attempt })
	return out
}

// escape makes s one safe path component: [A-Za-z0-9_-] and inner dots pass,
// everything else (including '/', '%', and a leading dot) becomes %XX. The
// mapping is injective, so distinct IDs never share a directory.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0
		if safe {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() == 0 {
		return "%"
	}
	return b.String()
}

func unescape(s string) string {
	if s == "%" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
