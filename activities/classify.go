package activities

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/metrics"
)

// classify turns a finished exec into the step's output or a ToolFailed /
// OutputLimit failure (SPEC §5: non-zero exit, stdout that is not one JSON
// object, a non-empty error field, OOM; output over the inline limit).
func (at *attempt) classify(res *exechost.ExecResult) (map[string]any, *stepError) {
	// reason is the metrics reason of a ToolFailed (ignored for others).
	fail := func(typ, reason, format string, args ...any) (map[string]any, *stepError) {
		return nil, &stepError{Type: typ, Reason: reason, Msg: at.scrub.String(fmt.Sprintf(format, args...)), Details: at.details(res)}
	}
	if res.OOMKilled {
		return fail(ErrTypeToolFailed, metrics.ReasonOOM, "tool was killed for exceeding its memory limit (%d bytes)", at.req.Resources.MemoryBytes)
	}
	if res.ExitCode != 0 {
		if out, err := parseOutput(res.Stdout); err == nil {
			if msg, ok := errorField(out); ok {
				return fail(ErrTypeToolFailed, metrics.ReasonExitCode, "tool exited with code %d: %s", res.ExitCode, msg)
			}
		}
		return fail(ErrTypeToolFailed, metrics.ReasonExitCode, "tool exited with code %d", res.ExitCode)
	}
	if limit := at.a.opts.InlineOutputLimit; int64(len(res.Stdout)) > limit {
		return fail(ErrTypeOutputLimit, "", "tool output is %d bytes, above the inline limit of %d bytes: write large data under /workspace (it is checkpointed and handed to dependent steps) and return its path instead", len(res.Stdout), limit)
	}
	out, err := parseOutput(res.Stdout)
	if err != nil {
		return fail(ErrTypeToolFailed, metrics.ReasonParseError, "tool stdout is not one JSON object: %v", err)
	}
	if msg, ok := errorField(out); ok {
		return fail(ErrTypeToolFailed, metrics.ReasonToolError, "tool reported an error: %s", msg)
	}
	scrubbed, _ := at.scrub.Value(out).(map[string]any)
	return scrubbed, nil
}

func parseOutput(stdout []byte) (map[string]any, error) {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return nil, errors.New("stdout is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got a JSON %s", jsonKind(v))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "value"
}

// errorField reports a non-empty "error" field: anything but absent, null,
// false and "".
func errorField(out map[string]any) (string, bool) {
	v, ok := out["error"]
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case nil:
		return "", false
	case bool:
		if !x {
			return "", false
		}
		return "true", true
	case string:
		return x, x != ""
	default:
		b, _ := json.Marshal(x)
		return string(b), true
	}
}
