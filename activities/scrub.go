package activities

import (
	"encoding/json"
	"sort"
	"strings"
)

// redacted replaces every secret value the step saw.
const redacted = "***"

// scrubber removes secret values from everything that leaves the activity:
// output, logs, failure messages. It also removes the values' JSON-escaped
// forms, since tool stdout is JSON and a secret with a quote or a newline
// appears escaped there.
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
// activity or reach a checkpoint: each non-empty value and, when it differs,
// its JSON-escaped form. Sorted longest first (then bytewise): a
// strings.Replacer tries patterns in argument order, so a secret that
// contains another secret is replaced whole.
func secretForms(values []string) []string {
	set := map[string]struct{}{}
	for _, v := range values {
		if v == "" {
			continue
		}
		set[v] = struct{}{}
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				set[esc] = struct{}{}
			}
		}
	}
	forms := make([]string, 0, len(set))
	for v := range set {
		forms = append(forms, v)
	}
	sort.Slice(forms, func(i, j int) bool {
		if len(forms[i]) != len(forms[j]) {
			return len(forms[i]) > len(forms[j])
		}
		return forms[i] < forms[j]
	})
	return forms
}

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
