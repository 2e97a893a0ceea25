package expr

import (
	"fmt"
	"sort"
	"strings"
)

// maxWalkDepth bounds the recursion of RenderValue and SubstituteSecrets
// over nested inputs.
const maxWalkDepth = 256

// RenderValue walks a JSON-like value (maps, slices, strings) and evaluates
// every string as a template. Strings that are exactly a secret expression
// are returned unchanged so the worker can substitute them later. Evaluated
// results are data and are never parsed again; but if a result contains a
// string that is exactly a secret expression (e.g. tool output crafted to
// read "{{ .secrets.api_key }}"), rendering fails, because the worker's
// SubstituteSecrets could not tell it from a real placeholder.
//
// map[string]string (step env) stays map[string]string: values are rendered
// as text.
func RenderValue(v any, env *Env) (any, error) {
	return render(v, env, "", 0)
}

func render(v any, env *Env, path string, depth int) (any, error) {
	return walkStrings(v, path, depth, func(s, path string, asText bool) (any, error) {
		return renderString(s, env, path, asText)
	})
}

// walkStrings rebuilds a JSON-like value, passing every string to fn with
// its path. Strings inside map[string]string and []string (step env) are
// text: fn must return a string for them (asText is true). Maps are walked
// in sorted key order so errors and limits are deterministic.
func walkStrings(v any, path string, depth int, fn func(s, path string, asText bool) (any, error)) (any, error) {
	if depth > maxWalkDepth {
		return nil, fmt.Errorf("%s: value nested deeper than %d levels: %w", pathOr(path), maxWalkDepth, ErrLimit)
	}
	text := func(s, path string) (string, error) {
		r, err := fn(s, path, true)
		if err != nil {
			return "", err
		}
		return r.(string), nil
	}
	switch x := v.(type) {
	case string:
		return fn(x, path, false)
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range sortedKeys(x) {
			r, err := walkStrings(x[k], joinPath(path, k), depth+1, fn)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			r, err := walkStrings(el, fmt.Sprintf("%s[%d]", path, i), depth+1, fn)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]string:
		out := make(map[string]string, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r, err := text(x[k], joinPath(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			r, err := text(s, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func renderString(s string, env *Env, path string, asText bool) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	t, err := Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pathOr(path), err)
	}
	if _, ok := t.SecretName(); ok {
		return s, nil
	}
	var r any
	if asText {
		r, err = t.EvalString(env)
	} else {
		r, err = t.Eval(env)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pathOr(path), err)
	}
	if name, found := findSecretPlaceholder(r, 0); found {
		return nil, fmt.Errorf("%s: %w", pathOr(path), &EvalError{
			Msg: fmt.Sprintf("evaluated data contains the secret placeholder {{ .secrets.%s }}; refusing it so it cannot be substituted later", name),
		})
	}
	return r, nil
}

// findSecretPlaceholder looks for a string that is exactly a secret
// expression anywhere inside an evaluated value.
func findSecretPlaceholder(v any, depth int) (string, bool) {
	if depth > 10_000 {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return secretPlaceholder(x)
	case []any:
		for _, el := range x {
			if n, ok := findSecretPlaceholder(el, depth+1); ok {
				return n, true
			}
		}
	case []string:
		for _, el := range x {
			if n, ok := secretPlaceholder(el); ok {
				return n, true
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if n, ok := findSecretPlaceholder(x[k], depth+1); ok {
				return n, true
			}
		}
	case map[string]string:
		for _, el := range x {
			if n, ok := secretPlaceholder(el); ok {
				return n, true
			}
		}
	}
	return "", false
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func pathOr(path string) string {
	if path == "" {
		return "value"
	}
	return path
}

// secretPlaceholder reports whether s is exactly `{{ .secrets.NAME }}`
// (whitespace inside the braces allowed). It is the same language as
// Parse + SecretName (a test and the fuzz target hold them together) but
// cheap enough for the worker to run over every input string.
func secretPlaceholder(s string) (string, bool) {
	if !strings.HasPrefix(s, "{{") || !strings.HasSuffix(s, "}}") || len(s) < 4 {
		return "", false
	}
	inner := strings.TrimFunc(s[2:len(s)-2], func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	name, ok := strings.CutPrefix(inner, ".secrets.")
	if !ok || name == "" || strings.HasPrefix(name, "__") {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		if !isNameChar(name[i]) {
			return "", false
		}
	}
	return name, true
}

// SubstituteSecrets walks a value and replaces every string that is exactly
// a secret expression with secrets[NAME]; a name missing from secrets is an
// error matching ErrMissingSecret. Nothing else is evaluated: other strings,
// including ones that contain {{ }}, are copied as they are.
func SubstituteSecrets(v any, secrets map[string]string) (any, error) {
	return substitute(v, secrets, "", 0)
}

func substitute(v any, secrets map[string]string, path string, depth int) (any, error) {
	return walkStrings(v, path, depth, func(s, path string, _ bool) (any, error) {
		name, ok := secretPlaceholder(s)
		if !ok {
			return s, nil
		}
		val, ok := secrets[name]
		if !ok {
			return nil, fmt.Errorf("%s: secret %q: %w", pathOr(path), name, ErrMissingSecret)
		}
		return val, nil
	})
}
