package expr

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// builtin is one whitelisted function. Filters are the same functions with
// the piped value as the first argument: `x | f(a)` is `f(x, a)`.
type builtin struct {
	min, max int // argument count including the piped value; max -1 = any
	call     func(ev *evaluator, pos int, args []any) (any, error)
}

func (b *builtin) checkArity(pos, n int) error {
	if n < b.min || (b.max >= 0 && n > b.max) {
		switch {
		case b.min == b.max:
			return syntaxErrf(pos, "function takes %d argument(s), got %d", b.min, n)
		default:
			return syntaxErrf(pos, "function takes %d to %d arguments, got %d", b.min, b.max, n)
		}
	}
	return nil
}

var builtins map[string]*builtin

func init() {
	builtins = map[string]*builtin{
		"now":     {0, 0, fnNow},
		"date":    {1, 2, fnDate},
		"len":     {1, 1, fnLen},
		"length":  {1, 1, fnLen},
		"join":    {1, 2, fnJoin},
		"map":     {2, 2, fnMap},
		"filter":  {2, 3, fnFilter},
		"lower":   {1, 1, strFn(strings.ToLower)},
		"upper":   {1, 1, strFn(strings.ToUpper)},
		"trim":    {1, 2, fnTrim},
		"replace": {3, 3, fnReplace},
		"split":   {1, 2, fnSplit},
		"default": {2, 2, fnDefault},
		"json":    {1, 1, fnJSON},
		"tojson":  {1, 1, fnJSON},
		"first":   {1, 1, fnFirst},
		"last":    {1, 1, fnLast},
		"keys":    {1, 1, fnKeys},
		"string":  {1, 1, fnString},
		"int":     {1, 1, fnInt},
		"float":   {1, 1, fnFloat},
	}
}

// asString coerces a scalar to text (null is ""); lists and objects are not
// silently stringified.
func asString(pos int, what string, v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case float64:
		return formatNumber(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", evalErrf(pos, "%s needs a string, got %s", what, typeName(v))
}

// asList accepts a list; null (a missing path) is the empty list.
func asList(pos int, what string, v any) ([]any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return x, nil
	}
	return nil, evalErrf(pos, "%s needs a list, got %s", what, typeName(v))
}

func (ev *evaluator) checkStr(pos int, s string) (any, error) {
	if len(s) > MaxResultBytes {
		return nil, limitEvalErr(pos, "result larger than %d bytes", MaxResultBytes)
	}
	return s, nil
}

func fnLen(ev *evaluator, pos int, args []any) (any, error) {
	switch x := args[0].(type) {
	case nil:
		return 0.0, nil
	case string:
		if err := ev.chargeBytes(pos, len(x)); err != nil {
			return nil, err
		}
		return float64(utf8.RuneCountInString(x)), nil
	case []any:
		return float64(len(x)), nil
	case map[string]any:
		return float64(len(x)), nil
	}
	return nil, evalErrf(pos, "len needs a string, list or object, got %s", typeName(args[0]))
}

func fnJoin(ev *evaluator, pos int, args []any) (any, error) {
	list, err := asList(pos, "join", args[0])
	if err != nil {
		return nil, err
	}
	sep := ""
	if len(args) > 1 {
		if sep, err = asString(pos, "join separator", args[1]); err != nil {
			return nil, err
		}
	}
	enc := encoder{m: &ev.meter, pos: pos}
	for i, el := range list {
		if err := ev.charge(pos, 1); err != nil {
			return nil, err
		}
		if i > 0 {
			if enc.b.Len()+len(sep) > MaxResultBytes {
				return nil, limitEvalErr(pos, "result larger than %d bytes", MaxResultBytes)
			}
			enc.b.WriteString(sep)
		}
		if err := enc.text(el); err != nil {
			return nil, err
		}
	}
	return enc.b.String(), nil
}

// fnMap plucks one field from every element: map('content').
func fnMap(ev *evaluator, pos int, args []any) (any, error) {
	list, err := asList(pos, "map", args[0])
	if err != nil {
		return nil, err
	}
	field, ok := args[1].(string)
	if !ok {
		return nil, evalErrf(pos, "map needs a field name, got %s", typeName(args[1]))
	}
	if len(list) > MaxCollectionLen {
		return nil, limitEvalErr(pos, "list longer than %d elements", MaxCollectionLen)
	}
	out := make([]any, 0, len(list))
	for _, el := range list {
		if err := ev.charge(pos, 1); err != nil {
			return nil, err
		}
		v, err := ev.normAt(pos, el)
		if err != nil {
			return nil, err
		}
		f, err := ev.lookup(pos, v, field)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// fnFilter keeps elements whose field is truthy, or equals value when one
// is given: filter('urgent'), filter('type', 'billing').
func fnFilter(ev *evaluator, pos int, args []any) (any, error) {
	list, err := asList(pos, "filter", args[0])
	if err != nil {
		return nil, err
	}
	field, ok := args[1].(string)
	if !ok {
		return nil, evalErrf(pos, "filter needs a field name, got %s", typeName(args[1]))
	}
	out := []any{}
	for _, el := range list {
		if err := ev.charge(pos, 1); err != nil {
			return nil, err
		}
		v, err := ev.normAt(pos, el)
		if err != nil {
			return nil, err
		}
		f, err := ev.lookup(pos, v, field)
		if err != nil {
			return nil, err
		}
		keep := Truthy(f)
		if len(args) == 3 {
			if keep, err = ev.equal(pos, f, args[2]); err != nil {
				return nil, err
			}
		}
		if keep {
			if len(out) >= MaxCollectionLen {
				return nil, limitEvalErr(pos, "list longer than %d elements", MaxCollectionLen)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// fnDefault replaces null and empty values ("", [], {}) but keeps false and
// 0, which are real answers.
func fnDefault(_ *evaluator, _ int, args []any) (any, error) {
	switch x := args[0].(type) {
	case nil:
		return args[1], nil
	case string:
		if x == "" {
			return args[1], nil
		}
	case []any:
		if len(x) == 0 {
			return args[1], nil
		}
	case map[string]any:
		if len(x) == 0 {
			return args[1], nil
		}
	}
	return args[0], nil
}

func fnJSON(ev *evaluator, pos int, args []any) (any, error) {
	enc := encoder{m: &ev.meter, pos: pos}
	if err := enc.json(args[0]); err != nil {
		return nil, err
	}
	return enc.b.String(), nil
}

func fnFirst(ev *evaluator, pos int, args []any) (any, error) {
	switch x := args[0].(type) {
	case nil:
		return nil, nil
	case []any:
		if len(x) == 0 {
			return nil, nil
		}
		return ev.normAt(pos, x[0])
	case string:
		if x == "" {
			return nil, nil
		}
		r, size := utf8.DecodeRuneInString(x)
		if r == utf8.RuneError {
			return x[:size], nil
		}
		return string(r), nil
	}
	return nil, evalErrf(pos, "first needs a list or string, got %s", typeName(args[0]))
}

func fnLast(ev *evaluator, pos int, args []any) (any, error) {
	switch x := args[0].(type) {
	case nil:
		return nil, nil
	case []any:
		if len(x) == 0 {
			return nil, nil
		}
		return ev.normAt(pos, x[len(x)-1])
	case string:
		if x == "" {
			return nil, nil
		}
		r, size := utf8.DecodeLastRuneInString(x)
		if r == utf8.RuneError {
			return x[len(x)-size:], nil
		}
		return string(r), nil
	}
	return nil, evalErrf(pos, "last needs a list or string, got %s", typeName(args[0]))
}

// fnKeys returns an object's keys sorted, so results are deterministic.
func fnKeys(ev *evaluator, pos int, args []any) (any, error) {
	switch x := args[0].(type) {
	case nil:
		return []any{}, nil
	case map[string]any:
		if err := ev.charge(pos, len(x)); err != nil {
			return nil, err
		}
		if len(x) > MaxCollectionLen {
			return nil, limitEvalErr(pos, "list longer than %d elements", MaxCollectionLen)
		}
		keys := sortedKeys(x)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = k
		}
		return out, nil
	}
	return nil, evalErrf(pos, "keys needs an object, got %s", typeName(args[0]))
}

func fnString(ev *evaluator, pos int, args []any) (any, error) {
	enc := encoder{m: &ev.meter, pos: pos}
	if err := enc.text(args[0]); err != nil {
		return nil, err
	}
	return enc.b.String(), nil
}

func toNumber(pos int, what string, v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, evalErrf(pos, "%s: %q is not a number", what, truncate(x, 64))
		}
		return f, nil
	}
	return 0, evalErrf(pos, "%s needs a number or numeric string, got %s", what, typeName(v))
}

func fnInt(_ *evaluator, pos int, args []any) (any, error) {
	f, err := toNumber(pos, "int", args[0])
	if err != nil {
		return nil, err
	}
	return math.Trunc(f), nil
}

func fnFloat(_ *evaluator, pos int, args []any) (any, error) {
	return toNumber(pos, "float", args[0])
}
