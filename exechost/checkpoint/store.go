package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/agentflow/agentflow/exechost"
)

// ErrExists is returned by Put when the checkpoint ID is already stored.
var ErrExists = errors.New("checkpoint already exists")

// SealFunc finishes a manifest once its content is durable and SizeBytes
// and SHA256 are set; the store records what it returns (Sealed signs here).
type SealFunc func(Manifest) (Manifest, error)

// Store keeps checkpoints by ID. Implementations are safe for concurrent use.
type Store interface {
	// Put streams content into a new checkpoint described by m. It computes
	// SizeBytes and SHA256 while writing, then passes the manifest through
	// seal (when not nil), and records the result only once the content is
	// durable, so a failed or canceled Put leaves nothing visible. An ID
	// that is already stored returns ErrExists.
	Put(ctx context.Context, m Manifest, content io.Reader, seal SealFunc) (Manifest, error)
	// Get returns the manifest and the content. The reader verifies size and
	// SHA256 as it goes and fails with ErrCorruptCheckpoint at the end if they
	// do not match. Unknown IDs return ErrNotFound.
	Get(ctx context.Context, id exechost.CheckpointID) (Manifest, io.ReadCloser, error)
	// Stat returns the schema-checked manifest; unknown IDs return ErrNotFound.
	Stat(ctx context.Context, id exechost.CheckpointID) (Manifest, error)
	// Delete removes a checkpoint; deleting an unknown ID returns nil.
	Delete(ctx context.Context, id exechost.CheckpointID) error
}

// hashingReader counts and hashes what passes through it and stops early
// when ctx ends. err keeps the first error of the source other than EOF
// (or ctx's), so a store that only passed it on can be told apart from a
// store that failed itself.
type hashingReader struct {
	ctx context.Context
	r   io.Reader
	h   hash.Hash
	n   int64
	err error
}

func newHashingReader(ctx context.Context, r io.Reader) *hashingReader {
	return &hashingReader{ctx: ctx, r: r, h: sha256.New()}
}

func (h *hashingReader) Read(p []byte) (int, error) {
	if err := h.ctx.Err(); err != nil {
		h.keep(err)
		return 0, err
	}
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		h.keep(err)
	}
	return n, err
}

func (h *hashingReader) keep(err error) {
	if h.err == nil {
		h.err = err
	}
}

func (h *hashingReader) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// verifyingReader checks content against its manifest at EOF.
type verifyingReader struct {
	hr     *hashingReader
	closer io.Closer
	m      Manifest
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.hr.Read(p)
	if v.hr.n > v.m.SizeBytes {
		return n, fmt.Errorf("checkpoint %s: content longer than %d bytes: %w", v.m.ID, v.m.SizeBytes, exechost.ErrCorruptCheckpoint)
	}
	if errors.Is(err, io.EOF) {
		if v.hr.n != v.m.SizeBytes || v.hr.sum() != v.m.SHA256 {
			return n, fmt.Errorf("checkpoint %s: content does not match manifest (size %d, sha256 %s): %w",
				v.m.ID, v.hr.n, v.hr.sum(), exechost.ErrCorruptCheckpoint)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.closer.Close() }
