// Package payloadcodec encrypts every Temporal payload agentflow writes —
// workflow and activity inputs and results, queries, signals, updates, memo,
// and (through the failure converter) error messages and stack traces —
// with AES-256-GCM, so Temporal's history holds no tool output, input or
// error text in clear. Keys come from a key-ring file (internal/keyfile);
// the key ID travels in the payload metadata, so adding a key (rotation)
// leaves old payloads readable. Search attributes are not payloads the
// codec sees: they stay in clear (they must, to be searchable).
package payloadcodec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/keyfile"
)

// Payload metadata of an encrypted payload.
const (
	// EncodingEncrypted is the "encoding" of an encrypted payload: the
	// name Temporal's samples and other SDKs' encryption codecs use, so
	// tools that know the convention recognise it.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key that encrypted the payload.
	MetadataKeyID = "encryption-key-id"
	// KeyBytes is the length of every key (AES-256).
	KeyBytes = 32
)

// aadPrefix binds a ciphertext to this format and to the key ID it claims:
// a payload relabelled with another key's ID fails authentication.
const aadPrefix = "agentflow payload v1\x00"

// ErrDecrypt: an encrypted payload did not authenticate: it was altered,
// truncated, or encrypted by a different key under the same ID.
var ErrDecrypt = errors.New("encrypted payload does not authenticate")

// UnknownKeyError: a payload was encrypted with a key the ring does not
// hold (removed too early, or another deployment's key).
type UnknownKeyError struct {
	ID    string   // the payload's key ID
	Known []string // the ring's key IDs
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("payload encrypted with key %q, which the codec key file does not hold (it holds %s)",
		e.ID, strings.Join(e.Known, ", "))
}

// Codec is a converter.PayloadCodec. It is safe for concurrent use.
type Codec struct {
	active string
	ids    []string // in file order, active first
	aeads  map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// Load reads a key-ring file: "<key-id> <base64 32-byte key>" a line, the
// first key encrypting, every key decrypting; mode 0600 or 0400. Errors name
// the file and, for a bad key, its line.
func Load(path string) (*Codec, error) {
	keys, err := keyfile.Load(path, func(k keyfile.Key) error {
		if len(k.Secret) != KeyBytes {
			return fmt.Errorf("key is %d bytes, want %d (AES-256; e.g. `head -c 32 /dev/urandom | base64`)", len(k.Secret), KeyBytes)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("codec key file: %w", err)
	}
	return New(keys...)
}

// New builds a codec from keys, the first encrypting.
func New(keys ...keyfile.Key) (*Codec, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("codec keys: %w", keyfile.ErrNoKey)
	}
	c := &Codec{active: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for _, k := range keys {
		if err := keyfile.CheckID(k.ID); err != nil {
			return nil, fmt.Errorf("codec keys: %w", err)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("codec keys: key id %q twice", k.ID)
		}
		if len(k.Secret) != KeyBytes {
			return nil, fmt.Errorf("codec keys: key %q is %d bytes, want %d", k.ID, len(k.Secret), KeyBytes)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("codec keys: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec keys: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
		c.ids = append(c.ids, k.ID)
	}
	return c, nil
}

// ActiveKeyID is the ID of the key that encrypts.
func (c *Codec) ActiveKeyID() string { return c.active }

// Encode encrypts each payload (its whole protobuf encoding, metadata
// included) with the active key under a fresh random nonce.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.active]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("encrypt payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return payloads, fmt.Errorf("encrypt payload: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(c.active),
			},
			Data: aead.Seal(nonce, nonce, plain, aad(c.active)),
		}
	}
	return out, nil
}

// Decode decrypts payloads this codec's format encrypted, with the key
// their metadata names, and passes every other payload through unchanged:
// history written before the codec was turned on stays readable.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		plain, err := c.open(p)
		if err != nil {
			return payloads, err
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(plain, &orig); err != nil {
			return payloads, fmt.Errorf("decrypted payload is not a payload: %w", err)
		}
		out[i] = &orig
	}
	return out, nil
}

func (c *Codec) open(p *commonpb.Payload) ([]byte, error) {
	idBytes, ok := p.GetMetadata()[MetadataKeyID]
	if !ok {
		return nil, fmt.Errorf("%w: no %s in its metadata", ErrDecrypt, MetadataKeyID)
	}
	id := string(idBytes)
	aead, ok := c.aeads[id]
	if !ok {
		return nil, &UnknownKeyError{ID: id, Known: slices.Clone(c.ids)}
	}
	data := p.GetData()
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: %d bytes is shorter than nonce and tag (key %q)", ErrDecrypt, len(data), id)
	}
	nonce, sealed := data[:aead.NonceSize()], data[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, sealed, aad(id))
	if err != nil {
		return nil, fmt.Errorf("%w: altered, or encrypted by another key named %q", ErrDecrypt, id)
	}
	return plain, nil
}

func aad(keyID string) []byte { return []byte(aadPrefix + keyID) }

// DataConverter is Temporal's default data converter with this codec
// applied to every payload.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter moves a failure's message and stack trace into its
// encoded attributes, encrypted by dc: without it every error text would
// be in history in clear.
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          dc,
		EncodeCommonAttributes: true,
	})
}

// Apply makes a Temporal client (and any worker built on it) encrypt with
// c: data converter and failure converter both. A nil codec leaves opts as
// they are (payloads in clear). Every client and worker agentflow dials
// goes through here, so the two converters are never set apart.
func (c *Codec) Apply(opts *client.Options) {
	if c == nil {
		return
	}
	dc := c.DataConverter()
	opts.DataConverter = dc
	opts.FailureConverter = FailureConverter(dc)
}
