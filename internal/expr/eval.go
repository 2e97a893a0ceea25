package expr

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// meter counts evaluation steps. Nothing in the language loops, so the only
// way to make an evaluation expensive is to feed big data to builtins; they
// charge per element and per 4 KiB scanned.
type meter struct {
	steps int
}

func (m *meter) charge(pos, n int) error {
	m.steps += n
	if m.steps > MaxSteps {
		return limitEvalErr(pos, "evaluation exceeded %d steps", MaxSteps)
	}
	return nil
}

func (m *meter) chargeBytes(pos, n int) error { return m.charge(pos, n>>12) }

type evaluator struct {
	meter
	env *Env
}

func (ev *evaluator) eval(n node) (any, error) {
	if err := ev.charge(n.offset(), 1); err != nil {
		return nil, err
	}
	switch n := n.(type) {
	case *litNode:
		return n.val, nil
	case *refNode:
		return ev.ref(n)
	case *fieldNode:
		x, err := ev.eval(n.x)
		if err != nil {
			return nil, err
		}
		return ev.lookup(n.pos, x, n.name)
	case *indexNode:
		x, err := ev.eval(n.x)
		if err != nil {
			return nil, err
		}
		idx, err := ev.eval(n.idx)
		if err != nil {
			return nil, err
		}
		return ev.index(n.pos, x, idx)
	case *listNode:
		if len(n.elems) > MaxCollectionLen {
			return nil, limitEvalErr(n.pos, "list longer than %d elements", MaxCollectionLen)
		}
		out := make([]any, 0, len(n.elems))
		for _, e := range n.elems {
			v, err := ev.eval(e)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case *unaryNode:
		x, err := ev.eval(n.x)
		if err != nil {
			return nil, err
		}
		if n.op == "not" {
			return !Truthy(x), nil
		}
		f, ok := x.(float64)
		if !ok {
			return nil, evalErrf(n.pos, "unary %s needs a number, got %s", n.op, typeName(x))
		}
		if n.op == "-" {
			return -f, nil
		}
		return f, nil
	case *binaryNode:
		return ev.binary(n)
	case *callNode:
		args := make([]any, len(n.args))
		for i, a := range n.args {
			v, err := ev.eval(a)
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		return n.fn.call(ev, n.pos, args)
	}
	return nil, evalErrf(n.offset(), "internal error: unknown node")
}

func (ev *evaluator) ref(n *refNode) (any, error) {
	switch n.root {
	case "inputs":
		if ev.env.Inputs == nil {
			return nil, nil
		}
		return ev.normAt(n.pos, ev.env.Inputs[n.name])
	case "steps":
		sv, ok := ev.env.Steps[n.name]
		if !ok {
			return nil, nil
		}
		var status any
		if sv.Status != "" {
			status = sv.Status
		}
		var out any
		if sv.Output != nil {
			out = sv.Output
		}
		return map[string]any{"status": status, "output": out}, nil
	}
	return nil, &EvalError{Offset: n.pos, Msg: "secret ." + n.root + "." + n.name + " cannot be evaluated here", err: ErrSecretNotAvailable}
}

func (ev *evaluator) normAt(pos int, v any) (any, error) {
	n, ok := norm(v)
	if !ok {
		return nil, evalErrf(pos, "value of unsupported type %T", v)
	}
	return n, nil
}

// lookup is `.name`: a field of an object; on a list an all-digit name is an
// index. Anything else is a missing path, i.e. null.
func (ev *evaluator) lookup(pos int, x any, name string) (any, error) {
	switch c := x.(type) {
	case map[string]any:
		return ev.normAt(pos, c[name])
	case []any:
		if i, ok := digitsIndex(name); ok && i < len(c) {
			return ev.normAt(pos, c[i])
		}
	}
	return nil, nil
}

func digitsIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// intIndex converts an index value to a position, counting negative
// indexes from the end like Jinja/Python.
func intIndex(idx any, n int) (int, bool) {
	f, ok := idx.(float64)
	if !ok || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if f < 0 {
		f += float64(n)
	}
	if f < 0 || f >= float64(n) {
		return 0, false
	}
	return int(f), true
}

func (ev *evaluator) index(pos int, x, idx any) (any, error) {
	switch c := x.(type) {
	case map[string]any:
		if k, ok := idx.(string); ok {
			return ev.normAt(pos, c[k])
		}
	case []any:
		if i, ok := intIndex(idx, len(c)); ok {
			return ev.normAt(pos, c[i])
		}
	case string:
		if _, ok := idx.(float64); ok {
			if err := ev.chargeBytes(pos, len(c)); err != nil {
				return nil, err
			}
			runes := utf8.RuneCountInString(c)
			i, ok := intIndex(idx, runes)
			if !ok {
				return nil, nil
			}
			for _, r := range c {
				if i == 0 {
					return string(r), nil
				}
				i--
			}
		}
	}
	return nil, nil
}

func (ev *evaluator) binary(n *binaryNode) (any, error) {
	l, err := ev.eval(n.l)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "or":
		if Truthy(l) {
			return l, nil
		}
		return ev.eval(n.r)
	case "and":
		if !Truthy(l) {
			return l, nil
		}
		return ev.eval(n.r)
	}
	r, err := ev.eval(n.r)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "==", "!=":
		eq, err := ev.equal(n.pos, l, r)
		if err != nil {
			return nil, err
		}
		return eq == (n.op == "=="), nil
	case "<", "<=", ">", ">=":
		return ev.order(n, l, r)
	case "in", "not in":
		in, err := ev.contains(n.pos, r, l)
		if err != nil {
			return nil, err
		}
		return in == (n.op == "in"), nil
	case "~":
		enc := encoder{m: &ev.meter, pos: n.pos}
		if err := enc.text(l); err != nil {
			return nil, err
		}
		if err := enc.text(r); err != nil {
			return nil, err
		}
		return enc.b.String(), nil
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				return ev.concat(n.pos, a, b)
			}
		case []any:
			if b, ok := r.([]any); ok {
				if len(a)+len(b) > MaxCollectionLen {
					return nil, limitEvalErr(n.pos, "list longer than %d elements", MaxCollectionLen)
				}
				if err := ev.charge(n.pos, len(a)+len(b)); err != nil {
					return nil, err
				}
				out := make([]any, 0, len(a)+len(b))
				return append(append(out, a...), b...), nil
			}
		}
	}
	a, okA := l.(float64)
	b, okB := r.(float64)
	if !okA || !okB {
		return nil, evalErrf(n.pos, "operator %s cannot be applied to %s and %s", n.op, typeName(l), typeName(r))
	}
	var res float64
	switch n.op {
	case "+":
		res = a + b
	case "-":
		res = a - b
	case "*":
		res = a * b
	case "/":
		if b == 0 {
			return nil, evalErrf(n.pos, "division by zero")
		}
		res = a / b
	case "%":
		if b == 0 {
			return nil, evalErrf(n.pos, "modulo by zero")
		}
		res = math.Mod(a, b)
	default:
		return nil, evalErrf(n.pos, "internal error: unknown operator %s", n.op)
	}
	if math.IsInf(res, 0) || math.IsNaN(res) {
		return nil, evalErrf(n.pos, "arithmetic overflow")
	}
	return res, nil
}

func (ev *evaluator) concat(pos int, a, b string) (any, error) {
	if len(a)+len(b) > MaxResultBytes {
		return nil, limitEvalErr(pos, "result larger than %d bytes", MaxResultBytes)
	}
	if err := ev.chargeBytes(pos, len(a)+len(b)); err != nil {
		return nil, err
	}
	return a + b, nil
}

// order implements < <= > >=: numbers with numbers, strings with strings
// (byte order). A null operand (a missing path) makes the comparison false
// rather than an error, so `if: "{{ .steps.x.output.n > 3 }}"` is simply
// false when the step produced no n.
func (ev *evaluator) order(n *binaryNode, l, r any) (any, error) {
	if l == nil || r == nil {
		return false, nil
	}
	var c int
	switch a := l.(type) {
	case float64:
		b, ok := r.(float64)
		if !ok {
			return nil, evalErrf(n.pos, "cannot compare %s with %s", typeName(l), typeName(r))
		}
		switch {
		case a < b:
			c = -1
		case a > b:
			c = 1
		}
	case string:
		b, ok := r.(string)
		if !ok {
			return nil, evalErrf(n.pos, "cannot compare %s with %s", typeName(l), typeName(r))
		}
		if err := ev.chargeBytes(n.pos, len(a)); err != nil {
			return nil, err
		}
		c = strings.Compare(a, b)
	default:
		return nil, evalErrf(n.pos, "cannot compare %s with %s", typeName(l), typeName(r))
	}
	switch n.op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	default:
		return c >= 0, nil
	}
}

// contains implements `x in c`: element of a list, key of an object,
// substring of a string. Nothing is in null.
func (ev *evaluator) contains(pos int, c, x any) (bool, error) {
	switch cc := c.(type) {
	case nil:
		return false, nil
	case []any:
		for _, el := range cc {
			eq, err := ev.equal(pos, el, x)
			if err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	case map[string]any:
		k, ok := x.(string)
		if !ok {
			return false, evalErrf(pos, "object keys are strings; cannot look up a %s with in", typeName(x))
		}
		_, found := cc[k]
		return found, nil
	case string:
		s, ok := x.(string)
		if !ok {
			return false, evalErrf(pos, "left side of in must be a string when the right side is a string, got %s", typeName(x))
		}
		if err := ev.chargeBytes(pos, len(cc)); err != nil {
			return false, err
		}
		return strings.Contains(cc, s), nil
	}
	return false, evalErrf(pos, "right side of in must be a list, object or string, got %s", typeName(c))
}

func (ev *evaluator) now(pos int) (time.Time, error) {
	if ev.env.Now.IsZero() {
		return time.Time{}, evalErrf(pos, "now is not available: the evaluation context has no clock")
	}
	return ev.env.Now, nil
}
