package expr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTemplateShape(t *testing.T) {
	tests := []struct {
		src             string
		literal, single bool
		secret          string
	}{
		{"", true, false, ""},
		{"plain", true, false, ""},
		{"{{ .inputs.a }}", false, true, ""},
		{"  {{ .inputs.a }}\n", false, true, ""},
		{"x {{ .inputs.a }}", false, false, ""},
		{"{{ .inputs.a }}{{ .inputs.b }}", false, false, ""},
		{"{{ .secrets.slack_webhook_url }}", false, true, "slack_webhook_url"},
		{"{{.secrets.k}}", false, true, "k"},
		{"{{\n\t.secrets.k  }}", false, true, "k"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			require.Equal(t, tt.src, tpl.Source())
			require.Equal(t, tt.literal, tpl.IsLiteral())
			require.Equal(t, tt.single, tpl.IsSingleExpr())
			name, ok := tpl.SecretName()
			require.Equal(t, tt.secret != "", ok)
			require.Equal(t, tt.secret, name)
			gotName, gotOK := secretPlaceholder(tt.src)
			require.Equal(t, ok, gotOK, "fast placeholder matcher must agree with Parse")
			require.Equal(t, name, gotName)
		})
	}
}

func TestRefs(t *testing.T) {
	tests := []struct {
		src  string
		want []Ref
	}{
		{"{{ .inputs.email_id }}", []Ref{{Root: "inputs", Name: "email_id", Path: []string{}, Offset: 3}}},
		{"{{ .steps.fetch_email.output.body }}", []Ref{{Root: "steps", Name: "fetch_email", Path: []string{"output", "body"}, Offset: 3}}},
		{"{{ .steps.a.status or .steps.b.status }}", []Ref{
			{Root: "steps", Name: "a", Path: []string{"status"}, Offset: 3},
			{Root: "steps", Name: "b", Path: []string{"status"}, Offset: 22},
		}},
		{"{{ .secrets.k }}", []Ref{{Root: "secrets", Name: "k", Path: []string{}, Offset: 3}}},
		// the static path stops at the first dynamic index; refs inside the
		// index are reported too, in source order
		{"{{ .steps.a.output['x'].items[.inputs.i].name }}", []Ref{
			{Root: "steps", Name: "a", Path: []string{"output", "x", "items"}, Offset: 3},
			{Root: "inputs", Name: "i", Path: []string{}, Offset: 30},
		}},
		{"{{ .steps.a.output.list[0].x }}", []Ref{{Root: "steps", Name: "a", Path: []string{"output", "list"}, Offset: 3}}},
		{"a {{ len(.inputs.x) }} b {{ .steps.s.output | json }}", []Ref{
			{Root: "inputs", Name: "x", Path: []string{}, Offset: 9},
			{Root: "steps", Name: "s", Path: []string{"output"}, Offset: 28},
		}},
		{"{{ now }}", []Ref{}},
		{"literal", []Ref{}},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			got := tpl.Refs()
			for i := range got {
				if got[i].Path == nil {
					got[i].Path = []string{}
				}
			}
			if len(tt.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tt.want, got)
			// Offsets point at the reference in the source.
			for _, r := range got {
				require.True(t, strings.HasPrefix(tt.src[r.Offset:], "."+r.Root+"."+r.Name), "offset %d", r.Offset)
			}
		})
	}

	t.Run("Refs returns a copy", func(t *testing.T) {
		tpl, err := Parse("{{ .steps.a.output.x }}")
		require.NoError(t, err)
		tpl.Refs()[0].Path[0] = "mutated"
		require.Equal(t, "output", tpl.Refs()[0].Path[0])
	})
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		offset int
		msg    string
	}{
		{"unterminated", "hello {{ .inputs.a", 6, "unterminated expression"},
		{"unterminated string", "{{ 'abc }}", 3, "unterminated string"},
		{"empty", "{{ }}", 3, "empty expression"},
		{"dunder field", "{{ .inputs.a.__class__ }}", 12, "names starting with _"},
		{"underscore field", "{{ .inputs.a._private }}", 12, "names starting with _"},
		{"dunder key", "{{ .inputs.a['__class__'] }}", 13, "names starting with __"},
		{"dunder root name", "{{ .steps.__init__ }}", 9, "names starting with __"},
		{"underscore root", "{{ ._x.y }}", 3, "names starting with _"},
		{"unknown root", "{{ .env.HOME }}", 3, "unknown root .env"},
		{"root without name", "{{ .steps }}", 3, "must be followed by a name"},
		{"root then space", "{{ .steps .a }}", 3, "must be followed by a name"},
		{"step field typo", "{{ .steps.a.outputs.x }}", 11, "only .status and .output"},
		{"step key typo", "{{ .steps.a['state'] }}", 12, "only .status and .output"},
		{"secret path", "{{ .secrets.k.x }}", 13, "nothing can follow"},
		{"secret filter", "{{ .secrets.k | lower }}", 3, "whole string"},
		{"secret mixed", "Bearer {{ .secrets.k }}", 10, "whole string"},
		{"secret with outer whitespace", " {{ .secrets.k }}", 4, "whole string"},
		{"secret in condition", "{{ .secrets.k == 'x' }}", 3, "whole string"},
		{"secret twice", "{{ .secrets.a }}{{ .secrets.b }}", 3, "whole string"},
		{"unknown function", "{{ system('ls') }}", 3, `unknown function "system"`},
		{"unknown filter", "{{ .inputs.a | exec }}", 15, `unknown function "exec"`},
		{"bare unknown name", "{{ config }}", 3, `unknown function "config"`},
		{"jinja-style root", "{{ steps.a.status }}", 3, `did you mean .steps`},
		{"method call", "{{ .inputs.a.items() }}", 18, "not callable"},
		{"call of call", "{{ now()() }}", 8, "not callable"},
		{"arity", "{{ replace('a') }}", 3, "takes 3 argument"},
		{"arity filter", "{{ 'a' | replace('b') }}", 9, "takes 3 argument"},
		{"needs args", "{{ lower }}", 3, "takes 1 argument"},
		{"chained comparison", "{{ 1 < 2 < 3 }}", 9, "chained comparisons"},
		{"assignment", "{{ a = 1 }}", 5, "use =="},
		{"single =", "{{ 1 = 1 }}", 5, "use =="},
		{"&&", "{{ 1 && 2 }}", 5, "use \"and\""},
		{"power", "{{ 2 ** 3 }}", 5, "not supported"},
		{"bang", "{{ !true }}", 3, "use \"not\""},
		{"nested braces", "{{ {{ .inputs.a }} }}", 3, "nested"},
		{"map literal", "{{ {'a': 1} }}", 3, "nested"},
		{"lone close brace", "{{ 1 } }}", 5, "map literals"},
		{"dangling operator", "{{ 1 + }}", 7, "unexpected end"},
		{"trailing tokens", "{{ 1 2 }}", 5, "unexpected"},
		{"bad escape", `{{ 'a\q' }}`, 5, "unknown escape"},
		{"bad unicode escape", `{{ '\u12' }}`, 4, `invalid \u escape`},
		{"nul escape", `{{ '\u0000' }}`, 4, "NUL"},
		{"nul byte", "{{ 1 \x00 }}", 5, "NUL byte"},
		{"nul in string", "{{ 'a\x00' }}", 5, "NUL byte"},
		{"invalid utf8", "{{ 1 \xff }}", 5, "invalid UTF-8"},
		{"invalid utf8 in string", "{{ '\xff' }}", 4, "invalid UTF-8"},
		{"unicode char", "{{ 1 ≠ 2 }}", 5, "unexpected character"},
		{"number out of range", "{{ 1e999 }}", 3, "invalid number"},
		{"dot without name", "{{ . }}", 3, "expected a field name"},
		{"missing bracket", "{{ .inputs.a[1 }}", 15, `expected "]"`},
		{"missing paren", "{{ len(.inputs.a }}", 17, `expected ")"`},
		{"pipe without name", "{{ .inputs.a | 'x' }}", 15, "expected a filter name"},
		{"keyword as value", "{{ and }}", 3, "unexpected keyword"},
		{"error in second expression", "{{ 1 }} and {{ __x }}", 15, "names starting with _"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.offset, se.Offset, se.Error())
			require.Contains(t, se.Msg, tt.msg)
			require.Contains(t, se.Error(), se.Msg)
			require.NotErrorIs(t, err, ErrLimit)
		})
	}
}

func TestParseLimits(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{"too long", strings.Repeat("a", MaxTemplateLen+1)},
		{"deep parentheses", "{{ " + strings.Repeat("(", MaxDepth+1) + "1" + strings.Repeat(")", MaxDepth+1) + " }}"},
		{"deep lists", "{{ " + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + " }}"},
		{"deep calls", "{{ " + strings.Repeat("len(", MaxDepth+1) + "1" + strings.Repeat(")", MaxDepth+1) + " }}"},
		{"deep not", "{{ " + strings.Repeat("not ", MaxDepth+1) + "1 }}"},
		{"deep minus", "{{ " + strings.Repeat("- ", MaxDepth+1) + "1 }}"},
		{"deep index", "{{ .inputs.a" + strings.Repeat("[.inputs.a", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + " }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			require.ErrorIs(t, err, ErrLimit)
		})
	}

	t.Run("just inside the limits parses", func(t *testing.T) {
		// The whole expression is level 1, so MaxDepth-1 parentheses fit.
		src := "{{ " + strings.Repeat("(", MaxDepth-1) + "1" + strings.Repeat(")", MaxDepth-1) + " }}"
		tpl, err := Parse(src)
		require.NoError(t, err)
		v, err := tpl.Eval(nil)
		require.NoError(t, err)
		require.Equal(t, 1.0, v)
		_, err = Parse("{{ " + strings.Repeat("(", MaxDepth) + "1" + strings.Repeat(")", MaxDepth) + " }}")
		require.ErrorIs(t, err, ErrLimit)
		_, err = Parse("{{ " + strings.Repeat("not ", MaxDepth-1) + "1 }}")
		require.NoError(t, err)
		_, err = Parse(strings.Repeat("a", MaxTemplateLen))
		require.NoError(t, err)
	})
}
