package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// parseInputs builds the run inputs from --input-file (a JSON object) and
// --input k=v pairs (later pairs win over the file). A value is typed
// against the spec's declaration: a string input takes the text verbatim
// (so --input id=007 stays "007"), every other type must parse as JSON of
// that type. Undeclared names are kept as JSON-or-string so that
// workflows.ResolveInputs reports them together with every other problem.
// The result is checked with workflows.ResolveInputs, the same function the
// workflow runs, so a run the CLI accepts is never refused for its inputs.
func parseInputs(plan *spec.Plan, file string, pairs []string) (map[string]any, error) {
	given := map[string]any{}
	var problems []string
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErr("--input-file: %v", err)
		}
		m, err := decodeJSONObject(data)
		if err != nil {
			return nil, usageErr("--input-file %s: %v", file, err)
		}
		for k, v := range m {
			given[k] = v
		}
	}
	decl := map[string]spec.InputType{}
	for _, d := range plan.Inputs {
		decl[d.Name] = d.Type
	}
	for _, p := range pairs {
		k, raw, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			problems = append(problems, fmt.Sprintf("--input %q: want name=value", p))
			continue
		}
		v, err := typedValue(decl[k], raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("input %q: %v", k, err))
			continue
		}
		given[k] = v
	}
	if len(problems) > 0 {
		return nil, usageErr("invalid inputs:\n  %s", strings.Join(problems, "\n  "))
	}
	if _, err := workflows.ResolveInputs(plan, given); err != nil {
		return nil, &ExitError{Code: ExitInvalid, Err: err}
	}
	return given, nil
}

// typedValue converts one --input value for a declared type ("" when the
// input is not declared).
func typedValue(t spec.InputType, raw string) (any, error) {
	if t == spec.TypeString {
		return raw, nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&v); err != nil || dec.More() {
		if t == "" {
			return raw, nil // undeclared: reported later, keep it readable
		}
		return nil, fmt.Errorf("want a %s (JSON), got %q", t, raw)
	}
	return v, nil
}

func decodeJSONObject(data []byte) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("want one JSON object: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("want one JSON object, found trailing data")
	}
	if m == nil {
		return nil, fmt.Errorf("want one JSON object, got null")
	}
	return m, nil
}
