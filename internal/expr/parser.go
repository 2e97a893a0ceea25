package expr

// Limits of the sandbox. They are generous for real specs and small enough
// that a hostile template or hostile tool output cannot exhaust a worker.
const (
	// MaxTemplateLen bounds the source of one template string.
	MaxTemplateLen = 64 << 10
	// MaxDepth bounds syntactic nesting: every parenthesis, list, index,
	// call's argument list and unary operator (not, -) is one level.
	MaxDepth = 64
	// MaxSteps bounds the work of one evaluation. Every AST node costs one
	// step, every collection element a builtin touches costs one, and every
	// 4 KiB of string a builtin scans costs one.
	MaxSteps = 100_000
	// MaxResultBytes bounds every string an evaluation produces
	// (concatenation, join, replace, json, interpolation, ...).
	MaxResultBytes = 1 << 20
	// MaxCollectionLen bounds every list an evaluation produces.
	MaxCollectionLen = 1 << 16
)

var stepFields = map[string]bool{"status": true, "output": true}

var roots = map[string]bool{"inputs": true, "steps": true, "secrets": true}

var keywords = map[string]bool{"and": true, "or": true, "not": true, "in": true, "true": true, "false": true, "null": true}

type parser struct {
	toks  []token
	i     int
	depth int
	refs  []Ref
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEnd {
		p.i++
	}
	return t
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == s
}

func (p *parser) isKeyword(s string) bool {
	t := p.peek()
	return t.kind == tIdent && t.text == s
}

func (p *parser) expectOp(s string) (token, error) {
	t := p.next()
	if t.kind != tOp || t.text != s {
		return t, syntaxErrf(t.pos, "expected %q, found %s", s, describe(t))
	}
	return t, nil
}

func describe(t token) string {
	switch t.kind {
	case tEnd:
		return "end of expression"
	case tString:
		return "string " + t.text
	case tField:
		return "field ." + t.text
	default:
		return "\"" + t.text + "\""
	}
}

// enter guards recursion; every recursive production calls it.
func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return limitSyntaxErr(pos, "expression nested deeper than %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseTop parses a whole {{ }} body and requires that it ends there.
func (p *parser) parseTop() (node, error) {
	if p.peek().kind == tEnd {
		return nil, syntaxErrf(p.peek().pos, "empty expression")
	}
	n, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEnd {
		if t.kind == tOp && t.text == "(" {
			return nil, syntaxErrf(t.pos, "only whitelisted functions can be called")
		}
		return nil, syntaxErrf(t.pos, "unexpected %s", describe(t))
	}
	return n, nil
}

func (p *parser) parseExpr() (node, error) {
	if err := p.enter(p.peek().pos); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.parseOr()
}

func (p *parser) parseOr() (node, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("or") {
		t := p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &binaryNode{pos: t.pos, op: "or", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (node, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("and") {
		t := p.next()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &binaryNode{pos: t.pos, op: "and", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (node, error) {
	if p.isKeyword("not") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryNode{pos: t.pos, op: "not", x: x}, nil
	}
	return p.parseCmp()
}

func (p *parser) cmpOp() (string, int, bool) {
	t := p.peek()
	switch {
	case t.kind == tOp:
		switch t.text {
		case "==", "!=", "<", "<=", ">", ">=":
			return t.text, t.pos, true
		}
	case t.kind == tIdent && t.text == "in":
		return "in", t.pos, true
	case t.kind == tIdent && t.text == "not":
		if n := p.toks[p.i+1]; n.kind == tIdent && n.text == "in" {
			return "not in", t.pos, true
		}
	}
	return "", 0, false
}

func (p *parser) parseCmp() (node, error) {
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	op, pos, ok := p.cmpOp()
	if !ok {
		return l, nil
	}
	p.next()
	if op == "not in" {
		p.next()
	}
	r, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	if _, pos2, again := p.cmpOp(); again {
		return nil, syntaxErrf(pos2, "chained comparisons are not supported; combine them with \"and\"")
	}
	return &binaryNode{pos: pos, op: op, l: l, r: r}, nil
}

func (p *parser) parseConcat() (node, error) {
	l, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	for p.isOp("~") {
		t := p.next()
		r, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		l = &binaryNode{pos: t.pos, op: "~", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAdd() (node, error) {
	l, err := p.parseMul()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		r, err := p.parseMul()
		if err != nil {
			return nil, err
		}
		l = &binaryNode{pos: t.pos, op: t.text, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseMul() (node, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("%") {
		t := p.next()
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		l = &binaryNode{pos: t.pos, op: t.text, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseUnary() (node, error) {
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		if t.text == "+" {
			return &unaryNode{pos: t.pos, op: "+", x: x}, nil
		}
		return &unaryNode{pos: t.pos, op: "-", x: x}, nil
	}
	return p.parseFiltered()
}

// parseFiltered handles `x | f`, `x | f(a, b)` and `x | f "a"`. Filters bind
// tighter than every binary operator (as in Jinja): `.a | len > 3` is
// `(.a | len) > 3`.
func (p *parser) parseFiltered() (node, error) {
	x, err := p.parsePostfix()
	if err != nil {
		return nil, err
	}
	for p.isOp("|") {
		p.next()
		nt := p.next()
		if nt.kind != tIdent {
			return nil, syntaxErrf(nt.pos, "expected a filter name after |, found %s", describe(nt))
		}
		fn, err := lookupFunc(nt)
		if err != nil {
			return nil, err
		}
		args := []node{x}
		switch t := p.peek(); {
		case t.kind == tOp && t.text == "(":
			more, err := p.parseArgs()
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
		case t.kind == tString:
			p.next()
			args = append(args, &litNode{pos: t.pos, val: t.str})
		case t.kind == tNumber:
			p.next()
			args = append(args, &litNode{pos: t.pos, val: t.num})
		}
		if err := fn.checkArity(nt.pos, len(args)); err != nil {
			return nil, err
		}
		x = &callNode{pos: nt.pos, name: nt.text, fn: fn, args: args}
	}
	return x, nil
}

func (p *parser) parseArgs() ([]node, error) {
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	var args []node
	for !p.isOp(")") {
		a, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return args, nil
}
