package expr

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type outcome int

const (
	refusedParse outcome = iota // Parse fails with a *SyntaxError
	refusedEval                 // Parse succeeds, evaluation fails with an *EvalError
	harmless                    // evaluates to a bounded value
)

type injectionCase struct {
	name  string
	src   string
	want  outcome
	limit bool // the refusal matches ErrLimit
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// injectionCorpus collects payloads from server-side template injection
// write-ups (Jinja2, Go templates) and resource-exhaustion attacks. Each one
// must be refused or evaluate harmlessly within the limits.
var injectionCorpus = []injectionCase{
	// Jinja2 SSTI: attribute walking to reach Python internals.
	{"seed payload", "{{ .steps.fetch_email.output.sender.__class__.__mro__[1].__subclasses__()[0].__init__.__globals__['os'].system('rm -rf /') }}", refusedParse, false},
	{"str class mro", "{{ ''.__class__.__mro__[1].__subclasses__() }}", refusedParse, false},
	{"list class", "{{ [].__class__.__base__ }}", refusedParse, false},
	{"tuple class", "{{ ().__class__ }}", refusedParse, false},
	{"config items", "{{ config.items() }}", refusedParse, false},
	{"lipsum globals", "{{ lipsum.__globals__['os'].popen('id').read() }}", refusedParse, false},
	{"cycler init", "{{ cycler.__init__.__globals__.os.popen('id').read() }}", refusedParse, false},
	{"joiner", "{{ joiner.__init__.__globals__ }}", refusedParse, false},
	{"namespace", "{{ namespace.__init__.__globals__ }}", refusedParse, false},
	{"self context", "{{ self._TemplateReference__context }}", refusedParse, false},
	{"request", "{{ request.application.__globals__.__builtins__.__import__('os') }}", refusedParse, false},
	{"attr filter", "{{ .inputs.x | attr('__class__') }}", refusedParse, false},
	{"dunder key", "{{ .inputs.x['__globals__'] }}", refusedParse, false},
	{"dunder key double quotes", `{{ .inputs.x["__class__"]["__mro__"] }}`, refusedParse, false},
	{"underscore field", "{{ .inputs.x._secret }}", refusedParse, false},
	{"method on data", "{{ .inputs.s.upper() }}", refusedParse, false},
	{"format string", "{{ '{0.__class__}'.format(.inputs.s) }}", refusedParse, false},
	{"range", "{{ range(100000000) | list }}", refusedParse, false},
	{"dict", "{{ dict(a=1) }}", refusedParse, false},
	{"import", "{{ __import__('os').system('id') }}", refusedParse, false},
	{"jinja statement inside expression", "{{ {% import os %} }}", refusedParse, false},
	// A computed key is only ever a map lookup on JSON data: harmless.
	{"computed dunder key", "{{ .inputs.x['_' ~ '_class__'] }}", harmless, false},
	{"prototype-ish field", "{{ .inputs.x.constructor.prototype }}", harmless, false},
	{"field on now", "{{ now.Location }}", harmless, false},
	// Go text/template actions.
	{"printf", `{{ printf "%s" .inputs.x }}`, refusedParse, false},
	{"call", "{{ call .X }}", refusedParse, false},
	{"template", `{{ template "x" }}`, refusedParse, false},
	{"define", `{{ define "x" }}boom{{ end }}`, refusedParse, false},
	{"block", `{{ block "x" . }}{{ end }}`, refusedParse, false},
	{"variable", "{{ $x := .inputs.x }}", refusedParse, false},
	{"range action", "{{ range .inputs.list }}{{ . }}{{ end }}", refusedParse, false},
	{"comment", "{{/* hidden */}}", refusedParse, false},
	{"trim markers", "{{- .inputs.x -}}", refusedParse, false},
	{"index builtin", "{{ index .inputs 0 }}", refusedParse, false},
	{"capitalised field", "{{ .Inputs.x }}", refusedParse, false},
	{"method on root", "{{ .steps.a.output.Method }}", harmless, false},
	{"html js", "{{ html .inputs.x | js }}", refusedParse, false},
	// Environment, files, network, processes.
	{"env function", "{{ env('HOME') }}", refusedParse, false},
	{"getenv", "{{ getenv('AWS_SECRET_ACCESS_KEY') }}", refusedParse, false},
	{"os.system", "{{ os.system('id') }}", refusedParse, false},
	{"os environ", "{{ os.environ['HOME'] }}", refusedParse, false},
	{"env root", "{{ .env.HOME }}", refusedParse, false},
	{"file function", "{{ file('/etc/passwd') }}", refusedParse, false},
	{"open", "{{ open('/etc/passwd').read() }}", refusedParse, false},
	{"exec", "{{ exec('id') }}", refusedParse, false},
	{"eval", "{{ eval('1+1') }}", refusedParse, false},
	{"http", "{{ http.get('http://169.254.169.254/') }}", refusedParse, false},
	{"secrets enumeration", "{{ .secrets | keys }}", refusedParse, false},
	{"secret via filter", "{{ .secrets.k | json }}", refusedParse, false},
	{"secret in text", "token={{ .secrets.k }}", refusedParse, false},
	{"secret by dynamic key", "{{ .secrets[.inputs.x] }}", refusedParse, false},
	{"secret in condition", "{{ .secrets.k == 'hunter2' }}", refusedParse, false},
	{"secret length oracle", "{{ len(.secrets.k) }}", refusedParse, false},
	// Deep nesting.
	{"10k parentheses", "{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}", refusedParse, true},
	{"10k brackets", "{{ " + repeat("[", 10000) + repeat("]", 10000) + " }}", refusedParse, true},
	{"5k index", "{{ .inputs.x" + repeat("[.inputs.x", 5000) + repeat("]", 5000) + " }}", refusedParse, true},
	{"10k not", "{{ " + repeat("not ", 10000) + "1 }}", refusedParse, true},
	{"10k minus", "{{ " + repeat("-", 10000) + "1 }}", refusedParse, true},
	{"10k calls", "{{ " + repeat("len(", 10000) + "1" + repeat(")", 10000) + " }}", refusedParse, true},
	{"10k open braces", repeat("{{", 10000), refusedParse, false},
	{"long flat chain", "{{ 1" + repeat(" + 1", 10000) + " }}", harmless, false},
	{"long or chain", "{{ null" + repeat(" or null", 5000) + " or 'x' }}", harmless, false},
	// Size amplification.
	{"string repeat", "{{ 'a' * 100000000 }}", refusedEval, false},
	{"list repeat", "{{ [1] * 100000000 }}", refusedEval, false},
	{"replace doubling", "{{ 'aa'" + repeat(" | replace('a', 'aa')", 30) + " }}", refusedEval, true},
	{"json escaping doubling", `{{ '"\\'` + repeat(" | json", 40) + " }}", refusedEval, true},
	{"join doubling", "{{ [[.inputs.mb, .inputs.mb] | join, [.inputs.mb, .inputs.mb] | join] | join }}", refusedEval, true},
	{"concat doubling", "{{ .inputs.mb ~ .inputs.mb }}", refusedEval, true},
	{"plus doubling", "{{ .inputs.mb + .inputs.mb }}", refusedEval, true},
	{"interpolation doubling", "{{ .inputs.mb }}{{ .inputs.mb }}", refusedEval, true},
	{"split explosion", "{{ .inputs.mb | split('') }}", refusedEval, true},
	{"huge date layout", "{{ now | date(.inputs.mb) }}", refusedEval, true},
	{"upper of big", "{{ .inputs.mb | upper | len }}", harmless, false},
	// Work amplification over (hostile) data.
	{"map over huge list", "{{ .inputs.many | map('x') | map('x') | map('x') }}", refusedEval, true},
	{"in over huge list", "{{ 'zz' in .inputs.many" + repeat(" or 'zz' in .inputs.many", 3) + " }}", refusedEval, true},
	{"string index scans", "{{ [" + repeat(".inputs.mb[-1], ", 500) + "1] }}", refusedEval, true},
	{"equality of huge lists", "{{ [" + repeat(".inputs.many == .inputs.many, ", 5) + "1] }}", refusedEval, true},
	// Malformed input.
	{"unterminated", "{{ .inputs.x", refusedParse, false},
	{"only open", "{{", refusedParse, false},
	{"unterminated string", "{{ 'abc", refusedParse, false},
	{"close then open", "}}{{", refusedParse, false},
	{"nested expression", "{{ {{ .inputs.x }} }}", refusedParse, false},
	{"NUL in expression", "{{ .inputs.x\x00 }}", refusedParse, false},
	{"NUL in string", "{{ 'a\x00b' }}", refusedParse, false},
	{"NUL in text", "a\x00b {{ 1 }}", harmless, false},
	{"invalid UTF-8 in expression", "{{ .inputs.x \xc3\x28 }}", refusedParse, false},
	{"invalid UTF-8 in string", "{{ '\xed\xa0\x80' }}", refusedParse, false},
	{"invalid UTF-8 in text", "\xff {{ 1 }}", harmless, false},
	{"fullwidth letters", "{{ .inputs.ｘ }}", refusedParse, false},
	{"zero-width space", "{{ .inputs.x\u200b }}", refusedParse, false},
	{"right-to-left override", "{{ '\u202e' ~ .inputs.x }}", harmless, false},
	{"template too long", "{{ '" + repeat("a", MaxTemplateLen) + "' }}", refusedParse, true},
}

func injectionEnv() *Env {
	many := make([]any, 40_000)
	for i := range many {
		many[i] = map[string]any{"x": float64(i)}
	}
	return &Env{
		Now: time.Date(2024, 6, 15, 9, 0, 0, 0, time.UTC),
		Inputs: map[string]any{
			"x":    map[string]any{"a": 1.0},
			"s":    "str",
			"mb":   strings.Repeat("ab", MaxResultBytes/2-8), // just under 1 MiB
			"many": many,
		},
		Steps: map[string]StepView{"a": {Status: "success", Output: map[string]any{"k": "v"}}},
	}
}

func TestInjectionCorpus(t *testing.T) {
	env := injectionEnv()
	for _, tc := range injectionCorpus {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := Parse(tc.src)
			if tc.want == refusedParse {
				var se *SyntaxError
				require.ErrorAs(t, err, &se)
				require.Equal(t, tc.limit, errorsIsLimit(err), "limit: %v", err)
				require.GreaterOrEqual(t, se.Offset, 0)
				require.LessOrEqual(t, se.Offset, len(tc.src))
				return
			}
			require.NoError(t, err)
			v, err := tpl.Eval(env)
			if tc.want == refusedEval {
				var ee *EvalError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, tc.limit, errorsIsLimit(err), "limit: %v", err)
				return
			}
			require.NoError(t, err)
			requireBounded(t, v)
		})
	}
}

func requireBounded(t *testing.T, v any) {
	t.Helper()
	switch x := v.(type) {
	case string:
		// a mixed template may add its (bounded) literal text to 1 MiB
		require.LessOrEqual(t, len(x), MaxResultBytes+MaxTemplateLen)
	case []any:
		require.LessOrEqual(t, len(x), MaxCollectionLen)
	}
}
