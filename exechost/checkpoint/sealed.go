package checkpoint

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentflow/agentflow/exechost"
)

// macDomain separates manifest MACs from any other use of the same key.
const macDomain = "agentflow checkpoint manifest v2\n"

// Sealed is a Store decorator that signs manifests on write and verifies
// them on read, so whoever can write the storage underneath (a directory, a
// bucket) cannot forge a checkpoint or edit its manifest: a manifest that
// fails its MAC, names a key the Keyring does not hold, or has a schema
// other than SchemaVersion is ErrCorruptCheckpoint (never retried). The
// manifest binds the content's size and SHA-256, which the underlying
// store's reader verifies byte for byte.
type Sealed struct {
	inner Store
	keys  *Keyring
	// allowUnsigned accepts LegacySchemaVersion manifests (no MAC).
	allowUnsigned bool
}

var _ Store = (*Sealed)(nil)

// SealedOptions configure a Sealed store.
type SealedOptions struct {
	// AllowUnsigned reads schema-1 (unsigned) manifests of earlier workers.
	// Off by default: with it, a storage writer can forge those.
	AllowUnsigned bool
}

// NewSealed wraps inner.
func NewSealed(inner Store, keys *Keyring, opts SealedOptions) (*Sealed, error) {
	if inner == nil || keys == nil {
		return nil, fmt.Errorf("sealed checkpoint store: store and keyring are required")
	}
	return &Sealed{inner: inner, keys: keys, allowUnsigned: opts.AllowUnsigned}, nil
}

// mac computes the MAC of m (its MAC field ignored) under secret.
func mac(m Manifest, secret []byte) (string, error) {
	m.MAC = ""
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode manifest: %w", err)
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(macDomain))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (s *Sealed) sign(m Manifest) (Manifest, error) {
	m.SchemaVersion = SchemaVersion
	m.KeyID = s.keys.SigningKeyID()
	secret, _ := s.keys.key(m.KeyID)
	sum, err := mac(m, secret)
	if err != nil {
		return Manifest{}, err
	}
	m.MAC = sum
	return m, nil
}

// verify authenticates a manifest read from the inner store.
func (s *Sealed) verify(m Manifest) error {
	corrupt := func(reason string) error {
		return fmt.Errorf("checkpoint %s: manifest %s: %w", m.ID, reason, exechost.ErrCorruptCheckpoint)
	}
	switch m.SchemaVersion {
	case LegacySchemaVersion:
		if s.allowUnsigned {
			return nil
		}
		return corrupt("is unsigned (schema 1; the worker does not allow unsigned checkpoints)")
	case SchemaVersion:
	default:
		return corrupt(fmt.Sprintf("has schema %d", m.SchemaVersion))
	}
	if m.MAC == "" {
		return corrupt("has no mac")
	}
	secret, ok := s.keys.key(m.KeyID)
	if !ok {
		return corrupt(fmt.Sprintf("is signed by unknown key %q", m.KeyID))
	}
	want, err := mac(m, secret)
	if err != nil {
		return corrupt(err.Error())
	}
	if !hmac.Equal([]byte(want), []byte(m.MAC)) {
		return corrupt("fails its mac")
	}
	return nil
}

// Put implements Store: the manifest is signed once size and digest are
// known, after seal (if any) ran.
func (s *Sealed) Put(ctx context.Context, m Manifest, content io.Reader, seal SealFunc) (Manifest, error) {
	return s.inner.Put(ctx, m, content, func(m Manifest) (Manifest, error) {
		if seal != nil {
			var err error
			if m, err = seal(m); err != nil {
				return Manifest{}, err
			}
		}
		return s.sign(m)
	})
}

// Stat implements Store.
func (s *Sealed) Stat(ctx context.Context, id exechost.CheckpointID) (Manifest, error) {
	m, err := s.inner.Stat(ctx, id)
	if err != nil {
		return Manifest{}, err
	}
	if err := s.verify(m); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Get implements Store. The manifest is authenticated before any content
// is handed out; the content reader verifies size and digest against it.
func (s *Sealed) Get(ctx context.Context, id exechost.CheckpointID) (Manifest, io.ReadCloser, error) {
	m, rc, err := s.inner.Get(ctx, id)
	if err != nil {
		return Manifest{}, nil, err
	}
	if err := s.verify(m); err != nil {
		rc.Close()
		return Manifest{}, nil, err
	}
	return m, rc, nil
}

// Delete implements Store.
func (s *Sealed) Delete(ctx context.Context, id exechost.CheckpointID) error {
	return s.inner.Delete(ctx, id)
}
