package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// parseBlocks accepts a JSON array, or a string holding one. A string that is
// not valid JSON gets one repair attempt (see repairJSON) because specs build
// blocks by pasting tool output into a JSON template, as the seed's
// daily-news spec does with a multi-line markdown summary.
func parseBlocks(raw json.RawMessage) ([]map[string]any, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	repaired := false
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, toolkit.BadInput("blocks: %v", err)
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, false, nil
		}
		if !json.Valid([]byte(s)) {
			fixed := repairJSON(s)
			if !json.Valid([]byte(fixed)) {
				var probe any
				err := json.Unmarshal([]byte(s), &probe)
				return nil, false, toolkit.BadInput("blocks is not valid JSON: %v", err)
			}
			s, repaired = fixed, true
		}
		raw = []byte(s)
	}
	var blocks []map[string]any
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, false, toolkit.BadInput("blocks must be a JSON array of objects: %v", err)
	}
	if len(blocks) > maxBlocks {
		return nil, false, toolkit.BadInput("%d blocks; Slack accepts at most %d", len(blocks), maxBlocks)
	}
	for i, b := range blocks {
		typ, _ := b["type"].(string)
		if typ == "" {
			return nil, false, toolkit.BadInput("blocks[%d] has no type", i)
		}
		if typ == "section" {
			if txt, ok := b["text"].(map[string]any); ok {
				if s, _ := txt["text"].(string); len(s) > maxSectionText {
					return nil, false, toolkit.BadInput("blocks[%d].text is %d characters; Slack accepts at most %d", i, len(s), maxSectionText)
				}
			}
		}
	}
	return blocks, repaired, nil
}

// repairJSON escapes, inside string literals only, what a template pastes in
// raw: control characters, backslashes that start no valid escape, and double
// quotes that do not end the string (an ending quote is followed, after
// spaces, by , : } ] or the end).
func repairJSON(s string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !in {
			b.WriteByte(c)
			if c == '"' {
				in = true
			}
			continue
		}
		switch {
		case c == '\\':
			if i+1 < len(s) && strings.IndexByte(`"\/bfnrtu`, s[i+1]) >= 0 {
				b.WriteByte(c)
				b.WriteByte(s[i+1])
				i++
			} else {
				b.WriteString(`\\`)
			}
		case c == '"':
			if endsString(s[i+1:]) {
				b.WriteByte(c)
				in = false
			} else {
				b.WriteString(`\"`)
			}
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func endsString(rest string) bool {
	rest = strings.TrimLeft(rest, " \t\r\n")
	return rest == "" || strings.IndexByte(",:}]", rest[0]) >= 0
}
