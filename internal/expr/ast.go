package expr

// The AST is deliberately tiny: there is no node that can name a host
// object, call a method or loop. Every node evaluates to a JSON value.

type node interface{ offset() int }

type litNode struct {
	pos int
	val any
}

// refNode is a root reference: .inputs.NAME, .steps.NAME or .secrets.NAME.
type refNode struct {
	pos        int
	root, name string
}

type fieldNode struct {
	pos  int
	x    node
	name string
}

type indexNode struct {
	pos    int
	x, idx node
}

type listNode struct {
	pos   int
	elems []node
}

type unaryNode struct {
	pos int
	op  string // "-", "not"
	x   node
}

type binaryNode struct {
	pos  int
	op   string // or and == != < <= > >= in "not in" + - ~ * / %
	l, r node
}

type callNode struct {
	pos  int
	name string
	fn   *builtin
	args []node // for filters the piped value is args[0]
}

func (n *litNode) offset() int    { return n.pos }
func (n *refNode) offset() int    { return n.pos }
func (n *fieldNode) offset() int  { return n.pos }
func (n *indexNode) offset() int  { return n.pos }
func (n *listNode) offset() int   { return n.pos }
func (n *unaryNode) offset() int  { return n.pos }
func (n *binaryNode) offset() int { return n.pos }
func (n *callNode) offset() int   { return n.pos }
