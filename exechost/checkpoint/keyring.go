package checkpoint

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentflow/agentflow/internal/keyfile"
)

// MinKeyBytes is the shortest accepted signing secret.
const MinKeyBytes = 32

// LocalKeyFile is the key a worker without --checkpoint-key-file creates in
// its data directory on first start.
const LocalKeyFile = "checkpoint-signing.key"

// Key is one manifest-signing secret.
type Key struct {
	ID     string
	Secret []byte
}

// Keyring holds the keys a worker authenticates manifests with. The first
// key signs; every key verifies, so a key is rotated by putting the new one
// first and keeping the old one until its checkpoints are gone.
type Keyring struct {
	keys []Key
}

// NewKeyring checks and copies keys: at least one, IDs unique and simple,
// secrets at least MinKeyBytes long.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("keyring: no key")
	}
	seen := map[string]bool{}
	k := &Keyring{}
	for _, key := range keys {
		if err := keyfile.CheckID(key.ID); err != nil {
			return nil, fmt.Errorf("keyring: %w", err)
		}
		switch {
		case seen[key.ID]:
			return nil, fmt.Errorf("keyring: key id %q twice", key.ID)
		case len(key.Secret) < MinKeyBytes:
			return nil, fmt.Errorf("keyring: key %q shorter than %d bytes", key.ID, MinKeyBytes)
		}
		seen[key.ID] = true
		k.keys = append(k.keys, Key{ID: key.ID, Secret: bytes.Clone(key.Secret)})
	}
	return k, nil
}

// SigningKeyID is the ID of the key that signs.
func (k *Keyring) SigningKeyID() string { return k.keys[0].ID }

func (k *Keyring) key(id string) ([]byte, bool) {
	for _, key := range k.keys {
		if key.ID == id {
			return key.Secret, true
		}
	}
	return nil, false
}

// ErrBadSignature: Verify found the MAC wrong, the key unknown or the domain
// empty.
var ErrBadSignature = errors.New("bad signature")

// Sign MACs msg with the signing key under domain, a string that names
// what is signed ("agentflow attempt result v1"): the same key signs
// checkpoint manifests and other records, and the domain keeps a MAC of
// one kind from passing as another. It returns the signing key's ID and
// the hex MAC.
func (k *Keyring) Sign(domain string, msg []byte) (keyID, mac string) {
	id := k.SigningKeyID()
	secret, _ := k.key(id)
	return id, domainMAC(secret, domain, msg)
}

// Verify checks a MAC made by Sign with any key of the ring. It fails with
// ErrBadSignature (wrapped, naming why) for an unknown key, a wrong MAC or
// an empty domain.
func (k *Keyring) Verify(domain string, msg []byte, keyID, mac string) error {
	if domain == "" {
		return fmt.Errorf("%w: empty domain", ErrBadSignature)
	}
	secret, ok := k.key(keyID)
	if !ok {
		return fmt.Errorf("%w: unknown key %q", ErrBadSignature, keyID)
	}
	if !hmac.Equal([]byte(domainMAC(secret, domain, msg)), []byte(mac)) {
		return fmt.Errorf("%w: mac does not match (key %q)", ErrBadSignature, keyID)
	}
	return nil
}

// domainMAC is HMAC-SHA256(secret, len(domain) || domain || msg), hex. The
// length prefix makes (domain, msg) pairs unambiguous.
func domainMAC(secret []byte, domain string, msg []byte) string {
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "%d:%s", len(domain), domain)
	h.Write(msg)
	return hex.EncodeToString(h.Sum(nil))
}

// LoadKeyring reads a key file (internal/keyfile: one key per line,
// "<id> <base64 secret>", blank lines and lines starting with # ignored, the
// first key signing; a regular file, not a symlink, mode 0600 or 0400): it
// is what makes a stored manifest trustworthy. Secrets shorter than
// MinKeyBytes are refused with the file and line.
func LoadKeyring(path string) (*Keyring, error) {
	entries, err := keyfile.Load(path, func(k keyfile.Key) error {
		if len(k.Secret) < MinKeyBytes {
			return fmt.Errorf("secret shorter than %d bytes", MinKeyBytes)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint key file: %w", err)
	}
	keys := make([]Key, len(entries))
	for i, e := range entries {
		keys[i] = Key{ID: e.ID, Secret: e.Secret}
	}
	k, err := NewKeyring(keys...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key file %s: %w", path, err)
	}
	return k, nil
}

// LoadOrCreateLocalKeyring loads dir/LocalKeyFile, creating it (0600, a
// random 32-byte key) first if it does not exist; created says so, for the
// worker's log. Only for a worker whose checkpoints no other worker reads.
func LoadOrCreateLocalKeyring(dir string) (k *Keyring, created bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("checkpoint key dir: %w", err)
	}
	path := filepath.Join(dir, LocalKeyFile)
	secret := make([]byte, MinKeyBytes)
	id := make([]byte, 4)
	if _, err := rand.Read(secret); err != nil {
		return nil, false, err
	}
	if _, err := rand.Read(id); err != nil {
		return nil, false, err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		line := fmt.Sprintf("# agentflow checkpoint signing key, generated by the worker\nlocal-%s %s\n",
			hex.EncodeToString(id), base64.StdEncoding.EncodeToString(secret))
		if created, err = createComplete(path, []byte(line)); err != nil {
			return nil, false, fmt.Errorf("checkpoint key file: %w", err)
		}
	}
	k, err = LoadKeyring(path)
	return k, created, err
}

// createComplete creates path with content, 0600, only if it does not
// exist, and never visible half-written: the content goes to a temp file
// that is then hard-linked into place (link fails if path exists, so two
// workers starting at once agree on one key).
func createComplete(path string, content []byte) (bool, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(content)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		return false, nil // another worker won
	} else if err != nil {
		return false, err
	}
	return true, nil
}
