package workspace

import "github.com/agentflow/agentflow/exechost"

// The redaction primitives are host-neutral and live in exechost (so the
// contract kit and any other host use the very same code); these names keep
// the workspace package's callers readable.

// RedactByte replaces every byte of a redacted occurrence.
const RedactByte = exechost.RedactByte

// ErrSecretName matches an entry refused because its name or symlink target
// contains a value to redact.
var ErrSecretName = exechost.ErrSecretName

// Redactor is exechost.Redactor: a same-length streaming redactor.
type Redactor = exechost.Redactor

// NewRedactor returns a Redactor for values, or nil when no value is
// non-empty.
func NewRedactor(values []string) *Redactor { return exechost.NewRedactor(values) }

// RedactBytes is exechost.RedactBytes.
func RedactBytes(data []byte, values []string) []byte { return exechost.RedactBytes(data, values) }

// ContainsAny is exechost.ContainsAny.
func ContainsAny(s string, values []string) bool { return exechost.ContainsAny(s, values) }

const redactChunk = exechost.RedactChunk
