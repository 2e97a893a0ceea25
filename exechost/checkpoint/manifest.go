// Package checkpoint stores workspace snapshots: a tar stream plus a
// versioned manifest that is schema-checked on every read. Sealed, a Store
// decorator, authenticates manifests with a worker Keyring (HMAC-SHA256), so
// a writer to the storage alone cannot forge or edit one; the manifest in
// turn carries the content's size and SHA-256, which every read verifies.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// SchemaVersion is the manifest format this package writes: schema 2 adds
// key_id and mac (see Sealed). Readers refuse any version but this one and
// LegacySchemaVersion rather than guess at fields they do not know; Sealed
// refuses the legacy one too unless told otherwise.
const SchemaVersion = 2

// LegacySchemaVersion is the unsigned format of earlier workers.
const LegacySchemaVersion = 1

// maxManifestBytes bounds a manifest read from the store; a real one is a
// few hundred bytes.
const maxManifestBytes = 64 << 10

var (
	// Compiled on first use: every agentctl start (validate must stay fast)
	// would otherwise pay for these at package init.
	sha256Pattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
)

// Manifest describes one stored checkpoint. The content is always a tar
// stream of /workspace relative paths.
type Manifest struct {
	SchemaVersion int                     `json:"schema_version"`
	ID            exechost.CheckpointID   `json:"id"`
	ExecutionID   exechost.ExecutionID    `json:"execution_id"`
	ImageDigest   string                  `json:"image_digest"`
	Resources     exechost.ResourceLimits `json:"resources"`
	Reason        string                  `json:"reason,omitempty"`
	SizeBytes     int64                   `json:"size_bytes"`
	SHA256        string                  `json:"sha256"`
	CreatedAt     time.Time               `json:"created_at"`
	// KeyID names the Keyring key that computed MAC (schema 2).
	KeyID string `json:"key_id,omitempty"`
	// MAC is the hex HMAC-SHA256 of the manifest with MAC empty (schema 2).
	MAC string `json:"mac,omitempty"`
}

// ValidID reports whether id is safe to use as a file or object name: no
// separators, no "..", bounded length.
func ValidID(id exechost.CheckpointID) error {
	if err := exechost.CheckCheckpointID(id); err != nil { // the one syntax rule
		return fmt.Errorf("%w: %w", err, exechost.ErrPolicy)
	}
	return nil
}

// Validate checks every field a reader depends on.
func (m *Manifest) Validate() error {
	var errs []error
	switch m.SchemaVersion {
	case SchemaVersion:
	case LegacySchemaVersion:
		if m.KeyID != "" || m.MAC != "" {
			errs = append(errs, errors.New("schema_version 1 has no key_id or mac"))
		}
	default:
		errs = append(errs, fmt.Errorf("schema_version %d, want %d", m.SchemaVersion, SchemaVersion))
	}
	if exechost.CheckCheckpointID(m.ID) != nil {
		errs = append(errs, fmt.Errorf("id %q invalid", m.ID))
	}
	if m.ExecutionID == "" {
		errs = append(errs, errors.New("execution_id missing"))
	}
	if m.ImageDigest == "" {
		errs = append(errs, errors.New("image_digest missing"))
	}
	if m.SizeBytes < 0 {
		errs = append(errs, fmt.Errorf("size_bytes %d negative", m.SizeBytes))
	}
	if !sha256Pattern().MatchString(m.SHA256) {
		errs = append(errs, fmt.Errorf("sha256 %q not 64 lowercase hex digits", m.SHA256))
	}
	if m.CreatedAt.IsZero() {
		errs = append(errs, errors.New("created_at missing"))
	}
	r := m.Resources
	if r.NanoCPUs <= 0 || r.MemoryBytes <= 0 || r.DiskBytes <= 0 || r.Pids <= 0 || r.Runtime <= 0 || r.MaxOutputBytes <= 0 {
		errs = append(errs, errors.New("resources incomplete"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("manifest: %w: %w", exechost.ErrCorruptCheckpoint, err)
	}
	return nil
}

// EncodeManifest validates m and returns its canonical JSON.
func EncodeManifest(m Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeManifest reads and schema-checks a manifest: unknown fields,
// trailing data, a different schema version or a missing field make it
// corrupt.
func DecodeManifest(r io.Reader) (Manifest, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	if len(b) > maxManifestBytes {
		return Manifest{}, fmt.Errorf("manifest larger than %d bytes: %w", maxManifestBytes, exechost.ErrCorruptCheckpoint)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("decode manifest: %w: %w", exechost.ErrCorruptCheckpoint, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Manifest{}, fmt.Errorf("decode manifest: trailing data: %w", exechost.ErrCorruptCheckpoint)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}
