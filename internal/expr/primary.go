package expr

import "strings"

func checkName(pos int, name string) error {
	if strings.HasPrefix(name, "_") {
		return syntaxErrf(pos, "name %q is not allowed: names starting with _ are reserved", name)
	}
	return nil
}

// parsePostfix parses a primary followed by .field and [index] accessors.
// While the accessors are static and the primary is a root reference, they
// are recorded in the reference's Path.
func (p *parser) parsePostfix() (node, error) {
	x, ref, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	static := ref != nil
	for {
		t := p.peek()
		switch {
		case t.kind == tField && !t.space:
			p.next()
			if err := checkName(t.pos, t.text); err != nil {
				return nil, err
			}
			if err := p.checkRefStep(x, ref, t.pos, t.text); err != nil {
				return nil, err
			}
			if static {
				ref.Path = append(ref.Path, t.text)
			}
			x = &fieldNode{pos: t.pos, x: x, name: t.text}
		case t.kind == tOp && t.text == "[" && !t.space:
			p.next()
			idx, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp("]"); err != nil {
				return nil, err
			}
			if lit, ok := idx.(*litNode); ok {
				if s, ok := lit.val.(string); ok {
					if strings.HasPrefix(s, "__") {
						return nil, syntaxErrf(lit.pos, "key %q is not allowed: names starting with __ are reserved", s)
					}
					if err := p.checkRefStep(x, ref, lit.pos, s); err != nil {
						return nil, err
					}
					if static {
						ref.Path = append(ref.Path, s)
					}
				} else {
					static = false
				}
			} else {
				static = false
			}
			x = &indexNode{pos: t.pos, x: x, idx: idx}
		case t.kind == tOp && t.text == "(":
			return nil, syntaxErrf(t.pos, "only whitelisted functions can be called; this value is not callable")
		default:
			if ref != nil {
				p.refs = append(p.refs, *ref)
			}
			return x, nil
		}
	}
}

// checkRefStep rejects `.steps.X.<field>` other than status/output right
// away, because a typo such as `.steps.x.outputs` would otherwise quietly be
// null forever; and anything after `.secrets.X`.
func (p *parser) checkRefStep(x node, ref *Ref, pos int, name string) error {
	r, ok := x.(*refNode)
	if !ok {
		return nil
	}
	switch r.root {
	case "steps":
		if !stepFields[name] {
			return syntaxErrf(pos, "a step has only .status and .output, not %q", name)
		}
	case "secrets":
		return syntaxErrf(pos, "a secret is a plain string; nothing can follow .secrets.%s", r.name)
	}
	return nil
}

func (p *parser) parsePrimary() (node, *Ref, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return &litNode{pos: t.pos, val: t.str}, nil, nil
	case tNumber:
		return &litNode{pos: t.pos, val: t.num}, nil, nil
	case tField:
		return p.parseRoot(t)
	case tIdent:
		return p.parseIdent(t)
	case tOp:
		switch t.text {
		case "(":
			x, err := p.parseExpr() // parseExpr counts the nesting level
			if err != nil {
				return nil, nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, nil, err
			}
			return x, nil, nil
		case "[":
			l := &listNode{pos: t.pos}
			for !p.isOp("]") {
				e, err := p.parseExpr()
				if err != nil {
					return nil, nil, err
				}
				l.elems = append(l.elems, e)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			if _, err := p.expectOp("]"); err != nil {
				return nil, nil, err
			}
			return l, nil, nil
		}
	}
	return nil, nil, syntaxErrf(t.pos, "unexpected %s", describe(t))
}

func (p *parser) parseRoot(t token) (node, *Ref, error) {
	if err := checkName(t.pos, t.text); err != nil {
		return nil, nil, err
	}
	if !roots[t.text] {
		return nil, nil, syntaxErrf(t.pos, "unknown root .%s (expressions can read .inputs, .steps and .secrets)", t.text)
	}
	nt := p.peek()
	if nt.kind != tField || nt.space {
		return nil, nil, syntaxErrf(t.pos, ".%s must be followed by a name, e.g. .%s.NAME", t.text, t.text)
	}
	p.next()
	// Names are checked against declarations by the spec validator; only the
	// dunder form is refused here so `.steps.__class__` reads as an attack,
	// not as an unknown step.
	if strings.HasPrefix(nt.text, "__") {
		return nil, nil, syntaxErrf(nt.pos, "name %q is not allowed: names starting with __ are reserved", nt.text)
	}
	ref := &Ref{Root: t.text, Name: nt.text, Offset: t.pos}
	return &refNode{pos: t.pos, root: t.text, name: nt.text}, ref, nil
}

func (p *parser) parseIdent(t token) (node, *Ref, error) {
	switch t.text {
	case "true":
		return &litNode{pos: t.pos, val: true}, nil, nil
	case "false":
		return &litNode{pos: t.pos, val: false}, nil, nil
	case "null":
		return &litNode{pos: t.pos, val: nil}, nil, nil
	}
	if keywords[t.text] {
		return nil, nil, syntaxErrf(t.pos, "unexpected keyword %q", t.text)
	}
	if roots[t.text] {
		return nil, nil, syntaxErrf(t.pos, "unknown name %q (did you mean .%s?)", t.text, t.text)
	}
	fn, err := lookupFunc(t)
	if err != nil {
		return nil, nil, err
	}
	if p.isOp("(") {
		args, err := p.parseArgs()
		if err != nil {
			return nil, nil, err
		}
		if err := fn.checkArity(t.pos, len(args)); err != nil {
			return nil, nil, err
		}
		return &callNode{pos: t.pos, name: t.text, fn: fn, args: args}, nil, nil
	}
	// A bare function name is a call without arguments (`now`).
	if err := fn.checkArity(t.pos, 0); err != nil {
		return nil, nil, err
	}
	return &callNode{pos: t.pos, name: t.text, fn: fn}, nil, nil
}

func lookupFunc(t token) (*builtin, error) {
	if err := checkName(t.pos, t.text); err != nil {
		return nil, err
	}
	fn, ok := builtins[t.text]
	if !ok {
		return nil, syntaxErrf(t.pos, "unknown function %q", t.text)
	}
	return fn, nil
}
