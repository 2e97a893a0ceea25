package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Number accepts a JSON number or a numeric string. Inputs arrive through
// {{ }} templates, and a template mixed with text always renders a string,
// so "42.50" must be as good as 42.5.
type Number struct {
	Value float64
	Set   bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*n = Number{}
		return nil
	}
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		s = strings.TrimSpace(s)
		if s == "" {
			*n = Number{}
			return nil
		}
	} else {
		s = string(b)
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
	if err != nil {
		return fmt.Errorf("not a number: %s", b)
	}
	*n = Number{Value: v, Set: true}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) {
	if !n.Set {
		return []byte("null"), nil
	}
	return json.Marshal(n.Value)
}

// Int returns the value as an int, or def when unset.
func (n Number) Int(def int) int {
	if !n.Set {
		return def
	}
	return int(n.Value)
}

// Text accepts a JSON string, or any other JSON value rendered as its JSON
// text (so a tool asked for "text" copes with an object a template passed).
type Text string

// UnmarshalJSON implements json.Unmarshaler.
func (t *Text) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*t = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Text(s)
	default:
		*t = Text(b)
	}
	return nil
}
