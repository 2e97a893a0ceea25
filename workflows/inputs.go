package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/spec"
)

// InputError is a run input that does not match the spec's declarations.
// The run ends FAILED before any step starts.
type InputError struct {
	Problems []string
}

func (e *InputError) Error() string {
	return "invalid run inputs: " + strings.Join(e.Problems, "; ")
}

// ResolveInputs applies declared defaults to the supplied run inputs and
// checks that required inputs are present, types match and no undeclared
// input is given. It is pure and deterministic (problems in declaration
// order, then unknown names sorted), so the workflow can call it and
// agentctl can call it before submitting.
func ResolveInputs(plan *spec.Plan, given map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(plan.Inputs))
	var problems []string
	declared := make(map[string]bool, len(plan.Inputs))
	for _, decl := range plan.Inputs {
		declared[decl.Name] = true
		v, ok := given[decl.Name]
		if !ok || v == nil {
			switch {
			case decl.Default != nil:
				out[decl.Name] = decl.Default
			case decl.Required:
				problems = append(problems, fmt.Sprintf("input %q is required", decl.Name))
			default:
				// Optional without default: visible as null to expressions.
				out[decl.Name] = nil
			}
			continue
		}
		norm, ok := normalizeInput(v, decl.Type)
		if !ok {
			problems = append(problems, fmt.Sprintf("input %q must be a %s, got %s", decl.Name, decl.Type, jsonTypeName(v)))
			continue
		}
		out[decl.Name] = norm
	}
	var unknown []string
	for name := range given {
		if !declared[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		problems = append(problems, fmt.Sprintf("input %q is not declared by the spec", name))
	}
	if len(problems) > 0 {
		return nil, &InputError{Problems: problems}
	}
	return out, nil
}

// normalizeInput checks v against the declared type and returns it in the
// JSON shape expressions expect (numbers as float64).
func normalizeInput(v any, t spec.InputType) (any, bool) {
	switch t {
	case spec.TypeString:
		s, ok := v.(string)
		return s, ok
	case spec.TypeBoolean:
		b, ok := v.(bool)
		return b, ok
	case spec.TypeNumber:
		switch n := v.(type) {
		case float64:
			return n, true
		case float32:
			return float64(n), true
		case int:
			return float64(n), true
		case int64:
			return float64(n), true
		case int32:
			return float64(n), true
		case json.Number:
			f, err := n.Float64()
			return f, err == nil
		}
		return nil, false
	case spec.TypeObject:
		m, ok := v.(map[string]any)
		return m, ok
	case spec.TypeArray:
		a, ok := v.([]any)
		return a, ok
	}
	return nil, false
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64, float32, int, int64, int32, json.Number:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
