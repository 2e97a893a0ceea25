package expr

import (
	"sort"
	"strings"
	"time"
)

// Template is a parsed string that may contain {{ }} expressions.
// It is immutable and safe for concurrent use.
type Template struct {
	src    string
	segs   []segment
	refs   []Ref
	secret string // set when the template is exactly {{ .secrets.NAME }}
}

// segment is literal text (expr == nil) or one {{ }} expression.
type segment struct {
	text string
	expr node
}

// Parse parses a string. Errors are *SyntaxError (errors.As) with Offset =
// byte offset into src where the problem is; limit violations also match
// ErrLimit.
func Parse(src string) (*Template, error) {
	if len(src) > MaxTemplateLen {
		return nil, limitSyntaxErr(MaxTemplateLen, "template longer than %d bytes", MaxTemplateLen)
	}
	t := &Template{src: src}
	i := 0
	for i < len(src) {
		j := strings.Index(src[i:], "{{")
		if j < 0 {
			t.segs = append(t.segs, segment{text: src[i:]})
			break
		}
		if j > 0 {
			t.segs = append(t.segs, segment{text: src[i : i+j]})
		}
		start := i + j + 2
		toks, end, err := lexExpr(src, start)
		if err != nil {
			return nil, err
		}
		p := &parser{toks: toks}
		n, err := p.parseTop()
		if err != nil {
			return nil, err
		}
		t.segs = append(t.segs, segment{expr: n})
		t.refs = append(t.refs, p.refs...)
		i = end
	}
	sort.SliceStable(t.refs, func(a, b int) bool { return t.refs[a].Offset < t.refs[b].Offset })
	if err := t.checkSecrets(); err != nil {
		return nil, err
	}
	return t, nil
}

// checkSecrets enforces that a secret only ever appears as the whole
// string. Anything else could copy the value into history, logs or a
// computed string the worker cannot scrub reliably.
func (t *Template) checkSecrets() error {
	if len(t.segs) == 1 && t.segs[0].expr != nil {
		if r, ok := t.segs[0].expr.(*refNode); ok && r.root == "secrets" {
			t.secret = r.name
			return nil
		}
	}
	for _, r := range t.refs {
		if r.Root == "secrets" {
			return syntaxErrf(r.Offset, "a secret may only be used as a whole string, exactly \"{{ .secrets.%s }}\"", r.Name)
		}
	}
	return nil
}

// Source returns the template text as given to Parse.
func (t *Template) Source() string { return t.src }

// IsLiteral reports whether the template has no {{ }} at all.
func (t *Template) IsLiteral() bool {
	for _, s := range t.segs {
		if s.expr != nil {
			return false
		}
	}
	return true
}

// single returns the only expression when the template is one {{ }} with
// nothing but whitespace around it.
func (t *Template) single() (node, bool) {
	var n node
	for _, s := range t.segs {
		if s.expr == nil {
			if strings.TrimSpace(s.text) != "" {
				return nil, false
			}
			continue
		}
		if n != nil {
			return nil, false
		}
		n = s.expr
	}
	return n, n != nil
}

// IsSingleExpr reports whether the template is exactly one {{ }} and
// nothing else but surrounding whitespace.
func (t *Template) IsSingleExpr() bool {
	_, ok := t.single()
	return ok
}

// SecretName reports whether the template is exactly `{{ .secrets.NAME }}`.
func (t *Template) SecretName() (string, bool) { return t.secret, t.secret != "" }

// Ref is a static reference to the evaluation context.
type Ref struct {
	Root   string   // "inputs", "steps", "secrets"
	Name   string   // input, step or secret name (second path element)
	Path   []string // remaining static path elements, e.g. ["output","body"] or ["status"]
	Offset int      // byte offset of the reference in the source
}

// Refs returns every reference in source order.
func (t *Template) Refs() []Ref {
	out := make([]Ref, len(t.refs))
	for i, r := range t.refs {
		r.Path = append([]string(nil), r.Path...)
		out[i] = r
	}
	return out
}

// Env is what an evaluation can see.
type Env struct {
	Inputs map[string]any
	Steps  map[string]StepView
	Now    time.Time
}

// StepView is the part of a step's state expressions can read.
type StepView struct {
	Status string         // pending, running, waiting_approval, success, failed, skipped, canceled
	Output map[string]any // nil when the step produced none
}

// Eval evaluates the template. A single-expression template yields the
// expression's JSON value; a literal yields the string; a mixed template
// yields the interpolated string (strings as-is, null as "", other values
// as JSON). A secret template fails with ErrSecretNotAvailable: secrets are
// substituted on the worker, never here.
func (t *Template) Eval(env *Env) (any, error) {
	if t.secret != "" {
		return nil, &EvalError{Offset: 0, Msg: "secret .secrets." + t.secret + " cannot be evaluated here", err: ErrSecretNotAvailable}
	}
	if env == nil {
		env = &Env{}
	}
	ev := &evaluator{env: env}
	if n, ok := t.single(); ok {
		return ev.eval(n)
	}
	if t.IsLiteral() {
		return t.src, nil
	}
	return t.interpolate(ev)
}

func (t *Template) interpolate(ev *evaluator) (string, error) {
	enc := encoder{m: &ev.meter}
	for _, s := range t.segs {
		if s.expr == nil {
			if enc.b.Len()+len(s.text) > MaxResultBytes {
				return "", limitEvalErr(0, "result larger than %d bytes", MaxResultBytes)
			}
			enc.b.WriteString(s.text)
			continue
		}
		v, err := ev.eval(s.expr)
		if err != nil {
			return "", err
		}
		enc.pos = s.expr.offset()
		if err := enc.text(v); err != nil {
			return "", err
		}
	}
	return enc.b.String(), nil
}

// EvalString evaluates the template and renders the result as text, the
// way it would be interpolated (for env values, which are strings).
func (t *Template) EvalString(env *Env) (string, error) {
	v, err := t.Eval(env)
	if err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	enc := encoder{m: &meter{}}
	if err := enc.text(v); err != nil {
		return "", err
	}
	return enc.b.String(), nil
}

// EvalBool evaluates for `if`: missing paths are falsy; the result is Jinja
// truthiness. The template must be a single expression.
func (t *Template) EvalBool(env *Env) (bool, error) {
	if _, ok := t.single(); !ok {
		return false, &EvalError{Msg: "a condition must be exactly one {{ }} expression"}
	}
	v, err := t.Eval(env)
	if err != nil {
		return false, err
	}
	return Truthy(v), nil
}
