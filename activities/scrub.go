package activities

import (
	"strings"

	"github.com/agentflow/agentflow/exechost"
)

// redacted replaces every secret value the step saw.
const redacted = "***"

// scrubber removes secret values from everything that leaves the activity:
// output, logs, failure messages. It also removes the values' encoded
// forms (secretForms): tool stdout is JSON, so a secret with a quote
// appears escaped there, and an Authorization header carries base64.
type scrubber struct {
	r *strings.Replacer
}

func newScrubber(values []string) *scrubber {
	olds := secretForms(values)
	if len(olds) == 0 {
		return &scrubber{}
	}
	pairs := make([]string, 0, 2*len(olds))
	for _, o := range olds {
		pairs = append(pairs, o, redacted)
	}
	return &scrubber{r: strings.NewReplacer(pairs...)}
}

// secretForms is every form of the values that must never leave the
// activity or reach a checkpoint: the values, their JSON-escaped forms and,
// for values of at least exechost.MinEncodedSecret bytes, their base64 (std
// and URL-safe, every alignment), hex and URL-escaped forms. Sorted longest
// first: a strings.Replacer tries patterns in argument order, so a form
// that contains another is replaced whole. One definition for scrubbing and
// checkpoint redaction: exechost.SecretForms.
func secretForms(values []string) []string { return exechost.SecretForms(values) }

func (s *scrubber) String(v string) string {
	if s.r == nil {
		return v
	}
	return s.r.Replace(v)
}

func (s *scrubber) Bytes(b []byte) []byte {
	if s.r == nil {
		return b
	}
	return []byte(s.r.Replace(string(b)))
}

// Value scrubs every string and map key of a decoded JSON value.
func (s *scrubber) Value(v any) any {
	if s.r == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return s.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[s.String(k)] = s.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.Value(e)
		}
		return out
	default:
		return v
	}
}
