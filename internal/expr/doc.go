// Package expr implements agentflow's {{ }} expression language: parsing,
// static references (for the spec validator and implicit dependencies) and
// evaluation over JSON values (for the workflow).
//
// # Why an own parser
//
// SPEC §4 prefers a well-kept library such as expr-lang/expr (what Argo
// Workflows uses), but the seed syntax cannot be carried by it verbatim:
// paths start with a dot (`.steps.fetch_email.output.body`, Go-template
// style; in expr-lang a leading dot only means "field of the current
// closure element" inside predicates); its pipe `x | f(y)`
// exists but `map('content')` there maps every element to the constant
// 'content' (its map takes a predicate closure), and a space-separated
// filter argument (`now | date "2006-01-02"`) is a syntax error in every
// expression library we looked at. Go's text/template carries the dots and the
// space-separated arguments but not `==`, `or` returning an operand over
// infix syntax, `len(...)`, or quoted-argument filters with parentheses,
// and it can call methods on host values. Rewriting the seed expressions
// would break "every seed expression must work verbatim". The language is
// small (no loops, no assignment, no user functions), so an own recursive
// descent parser of ~1k lines is the smaller risk, and it lets the sandbox
// be structural: there is no AST node that can reach a host object.
//
// # Language
//
//	.inputs.NAME  .steps.ID.status  .steps.ID.output.a.b  .secrets.NAME
//	x.field  x['key']  x[0]  x[-1]            missing paths are null
//	'str' "str" (escapes \n \t \r \\ \' \" \uXXXX)  12  1.5  true false null
//	[a, b]                                      list literal
//	not x   x and y   x or y                    and/or return an operand
//	== != < <= > >=   in   not in               no chaining (a < b < c)
//	+ - * / %   ~                               ~ concatenates as text
//	f(x, y)   x | f   x | f(y)   x | f "y"      filters = functions, x first
//
// Precedence, loosest first: or, and, not, comparison/in, ~, + -, * / %,
// unary - +, filter |, postfix . [ ]. Filters bind tighter than operators
// (Jinja): `.a | len > 3` is `(.a | len) > 3`, `.a or .b | upper` is
// `.a or (.b | upper)`. A filter's space-separated argument must be one
// string or number literal.
//
// Semantics: values are JSON (null, bool, float64, string, []any,
// map[string]any); Go ints, json.Number and a few typed slices/maps are
// normalised on access, anything else is an error (no reflection).
// Truthiness is Jinja's: null, false, 0, "", [] and {} are falsy.
// `==` is deep equality without coercion (1 != "1"). `<` and friends
// compare numbers with numbers and strings with strings; a null operand
// makes them false (a missing path in `if` is falsy), other mixes are
// errors. `+` adds numbers, concatenates two strings or two lists; `~`
// renders both sides as text and concatenates. `*` never repeats strings.
// `in`: element of a list, key of an object, substring of a string; nothing
// is in null.
//
// Functions: now date len/length join map filter lower upper replace trim
// split default json/tojson first last keys string int float. Collection
// functions treat null as [], string functions treat null as "". `now` is
// Env.Now as an RFC3339 string in UTC (the workflow passes workflow time);
// `date(ts, layout)` formats an RFC3339 string or Unix seconds with a Go
// layout.
//
// # Sandbox
//
// Static (Parse) errors: names starting with `_` (and keys starting with
// `__`), calls of unknown functions or of anything that is not a function
// name, unknown roots, `.steps.ID.x` for x other than status/output, and a
// secret anywhere except as the whole string `{{ .secrets.NAME }}`.
// Limits: MaxTemplateLen, MaxDepth, MaxSteps, MaxResultBytes,
// MaxCollectionLen; exceeding one yields an error matching ErrLimit.
// Values from tool output are data and never parsed again.
//
// Text outside {{ }} is copied verbatim (including {% %} and single
// braces); to write a literal "{{" use {{ '{{' }}.
package expr
