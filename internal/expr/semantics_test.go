package expr

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func semEnv() *Env {
	return &Env{
		Now: time.Date(2024, 6, 15, 9, 30, 5, 0, time.UTC),
		Inputs: map[string]any{
			"n":      3,              // YAML int: normalised to 3.0
			"big":    int64(1 << 40), // int64 too
			"jn":     json.Number("2.5"),
			"s":      "Hello",
			"empty":  "",
			"zero":   0.0,
			"f":      false,
			"t":      true,
			"list":   []any{1.0, "two", nil, map[string]any{"k": "v"}},
			"nums":   []any{3.0, 1.0, 2.0},
			"strs":   []string{"a", "b"},
			"none":   nil,
			"obj":    map[string]any{"b": 2.0, "a": 1.0, "nested": map[string]any{"x": []any{10.0, 20.0}}},
			"eobj":   map[string]any{},
			"elist":  []any{},
			"env":    map[string]string{"K": "V"},
			"users":  []any{map[string]any{"name": "ann", "admin": true, "team": "a"}, map[string]any{"name": "bob", "admin": false, "team": "b"}, map[string]any{"name": "cy", "team": "a"}},
			"ts":     "2024-01-02T03:04:05+02:00",
			"tmpl":   "{{ now }}",
			"uni":    "héllo wörld",
			"dotted": map[string]any{"a.b": 1.0, "0": "zero"},
		},
		Steps: map[string]StepView{
			"ok":      {Status: "success", Output: map[string]any{"n": 1.0}},
			"nothing": {Status: "skipped"},
		},
	}
}

func TestEvalSemantics(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		// literals and normalisation
		{"int input normalised", "{{ .inputs.n }}", 3.0},
		{"int64 input", "{{ .inputs.big }}", float64(1 << 40)},
		{"json.Number", "{{ .inputs.jn + 1 }}", 3.5},
		{"[]string input", "{{ .inputs.strs }}", []any{"a", "b"}},
		{"map[string]string input", "{{ .inputs.env.K }}", "V"},
		{"string literal escapes", `{{ 'a\tb\n\'c\'' }}`, "a\tb\n'c'"},
		{"double quoted", `{{ "say \"hi\" \u00e9" }}`, `say "hi" é`},
		{"number literal", "{{ 1.5e2 }}", 150.0},
		{"null literal", "{{ null }}", nil},
		{"list literal", "{{ [1, 'a', [true]] }}", []any{1.0, "a", []any{true}}},
		{"empty list literal", "{{ [] }}", []any{}},
		// missing paths
		{"missing input", "{{ .inputs.nope }}", nil},
		{"missing nested", "{{ .inputs.obj.nope.deeper[3] }}", nil},
		{"field of string", "{{ .inputs.s.length }}", nil},
		{"field of null", "{{ .inputs.none.x }}", nil},
		{"step without output", "{{ .steps.nothing.output.x }}", nil},
		{"unknown step", "{{ .steps.ghost.status }}", nil},
		{"step view", "{{ .steps.ok }}", map[string]any{"status": "success", "output": map[string]any{"n": 1.0}}},
		// indexing
		{"list index", "{{ .inputs.list[1] }}", "two"},
		{"negative index", "{{ .inputs.list[-1].k }}", "v"},
		{"index out of range", "{{ .inputs.list[10] }}", nil},
		{"fractional index", "{{ .inputs.list[0.5] }}", nil},
		{"string key", "{{ .inputs.obj['b'] }}", 2.0},
		{"key with dot", "{{ .inputs.dotted['a.b'] }}", 1.0},
		{"digit field on object", "{{ .inputs.dotted.0 }}", "zero"},
		{"digit field on list", "{{ .inputs.list.1 }}", "two"},
		{"computed key", "{{ .inputs.obj[.inputs.users[0].team == 'a' and 'a' or 'b'] }}", 1.0},
		{"string index is a character", "{{ .inputs.uni[1] }}", "é"},
		{"list index on object is null", "{{ .inputs.obj[0] }}", nil},
		// truthiness and operand-returning or/and
		{"or returns first truthy", "{{ .inputs.empty or .inputs.s }}", "Hello"},
		{"or returns last when all falsy", "{{ .inputs.zero or .inputs.elist }}", []any{}},
		{"and returns first falsy", "{{ .inputs.s and .inputs.zero and .inputs.t }}", 0.0},
		{"and returns last", "{{ .inputs.s and .inputs.n }}", 3.0},
		{"or short-circuits errors", "{{ .inputs.t or (1 / 0) }}", true},
		{"and short-circuits errors", "{{ .inputs.f and (1 / 0) }}", false},
		{"not null", "{{ not .inputs.none }}", true},
		{"not empty object", "{{ not .inputs.eobj }}", true},
		{"not non-empty list", "{{ not .inputs.list }}", false},
		{"not not", "{{ not not .inputs.s }}", true},
		// comparisons
		{"number equality across int types", "{{ .inputs.n == 3 }}", true},
		{"no coercion", "{{ 1 == '1' }}", false},
		{"null equals null", "{{ .inputs.none == .inputs.missing }}", true},
		{"deep equality", "{{ .inputs.obj.nested == .inputs.obj['nested'] }}", true},
		{"deep inequality", "{{ .inputs.obj == .inputs.eobj }}", false},
		{"list equality", "{{ .inputs.nums == [3, 1, 2] }}", true},
		{"list inequality", "{{ .inputs.nums != [3, 1] }}", true},
		{"less", "{{ 2 < 10 }}", true},
		{"string order", "{{ 'b' > 'a' }}", true},
		{"le ge", "{{ 2 <= 2 and 3 >= 4 }}", false},
		{"null ordering is false", "{{ .inputs.none < 1 }}", false},
		{"null ordering is false (ge)", "{{ .inputs.none >= .inputs.none }}", false},
		{"not binds looser than ==", "{{ not .inputs.n == 4 }}", true},
		// in
		{"in list", "{{ 'two' in .inputs.list }}", true},
		{"in list deep", "{{ .inputs.obj.nested.x in [[10, 20]] }}", true},
		{"not in list", "{{ 5 not in .inputs.nums }}", true},
		{"in object keys", "{{ 'a' in .inputs.obj }}", true},
		{"substring", "{{ 'ell' in .inputs.s }}", true},
		{"in null", "{{ 'x' in .inputs.none }}", false},
		// arithmetic and concatenation
		{"precedence", "{{ 1 + 2 * 3 - 4 / 2 }}", 5.0},
		{"parentheses", "{{ (1 + 2) * 3 }}", 9.0},
		{"modulo", "{{ 7 % 3 }}", 1.0},
		{"unary minus", "{{ -.inputs.n + 1 }}", -2.0},
		{"string plus string", "{{ .inputs.s + ' world' }}", "Hello world"},
		{"list plus list", "{{ .inputs.strs + [1] }}", []any{"a", "b", 1.0}},
		{"tilde renders", "{{ .inputs.s ~ 1 ~ .inputs.none ~ true ~ [1] }}", "Hello1true[1]"},
		// filters and functions
		{"len string runes", "{{ len(.inputs.uni) }}", 11.0},
		{"len list filter", "{{ .inputs.list | len }}", 4.0},
		{"len object", "{{ length(.inputs.obj) }}", 3.0},
		{"len null", "{{ len(.inputs.none) }}", 0.0},
		{"filter binds tighter than >", "{{ .inputs.list | len > 3 }}", true},
		{"join default sep", "{{ .inputs.strs | join }}", "ab"},
		{"join renders values", "{{ .inputs.list | join(',') }}", `1,two,,{"k":"v"}`},
		{"join null", "{{ .inputs.none | join(',') }}", ""},
		{"map pluck", "{{ .inputs.users | map('name') }}", []any{"ann", "bob", "cy"}},
		{"map missing field", "{{ .inputs.list | map('k') }}", []any{nil, nil, nil, "v"}},
		{"map null", "{{ .inputs.none | map('k') }}", []any{}},
		{"filter truthy", "{{ .inputs.users | filter('admin') | map('name') }}", []any{"ann"}},
		{"filter equals", "{{ .inputs.users | filter('team', 'a') | map('name') | join(' ') }}", "ann cy"},
		{"filter none match", "{{ .inputs.users | filter('team', 'z') }}", []any{}},
		{"lower upper", "{{ .inputs.s | lower ~ (.inputs.s | upper) }}", "helloHELLO"},
		{"lower of number", "{{ 12 | lower }}", "12"},
		{"lower of null", "{{ .inputs.none | lower }}", ""},
		{"replace", "{{ 'a-b-c' | replace('-', '+') }}", "a+b+c"},
		{"replace empty old", "{{ 'ab' | replace('', '.') }}", ".a.b."},
		{"trim", "{{ '  x \n' | trim }}", "x"},
		{"trim cutset", "{{ '--x--' | trim('-') }}", "x"},
		{"split", "{{ 'a,b,,c' | split(',') }}", []any{"a", "b", "", "c"}},
		{"split fields", "{{ ' a  b ' | split }}", []any{"a", "b"}},
		{"split empty", "{{ '' | split(',') }}", []any{}},
		{"default null", "{{ .inputs.none | default('d') }}", "d"},
		{"default empty string", "{{ .inputs.empty | default('d') }}", "d"},
		{"default empty list", "{{ default(.inputs.elist, 1) }}", 1.0},
		{"default keeps false", "{{ .inputs.f | default('d') }}", false},
		{"default keeps zero", "{{ .inputs.zero | default('d') }}", 0.0},
		{"default space arg", `{{ .inputs.none | default "d" }}`, "d"},
		{"json sorted keys no html escaping", "{{ .inputs.obj | json }}", `{"a":1,"b":2,"nested":{"x":[10,20]}}`},
		{"json string", `{{ '<a href="x">' | tojson }}`, `"<a href=\"x\">"`},
		{"json null", "{{ json(.inputs.none) }}", "null"},
		{"first last", "{{ [first(.inputs.nums), last(.inputs.nums), first(.inputs.elist)] }}", []any{3.0, 2.0, nil}},
		{"first of string", "{{ .inputs.uni | last }}", "d"},
		{"keys sorted", "{{ .inputs.obj | keys }}", []any{"a", "b", "nested"}},
		{"keys null", "{{ .inputs.none | keys }}", []any{}},
		{"string int float", "{{ [string(1.5), int('42.9'), float('2.5'), int(true)] }}", []any{"1.5", 42.0, 2.5, 1.0}},
		{"now", "{{ now }}", "2024-06-15T09:30:05Z"},
		{"now()", "{{ now() | date('15:04') }}", "09:30"},
		{"date of string keeps offset", `{{ .inputs.ts | date "2006-01-02 15:04 -0700" }}`, "2024-01-02 03:04 +0200"},
		{"date of unix seconds", "{{ 86400 | date('2006-01-02') }}", "1970-01-02"},
		{"date date-only", "{{ '2024-03-01' | date('Jan 2') }}", "Mar 1"},
		{"date default layout", "{{ .inputs.ts | date }}", "2024-01-02T03:04:05+02:00"},
		{"date null", "{{ .inputs.none | date('2006') }}", nil},
		{"filter chain with parens after space arg", `{{ now | date "2006" | int + 1 }}`, 2025.0},
		// tool output is data: a string that looks like a template stays literal
		{"template-looking data is not evaluated", "{{ .inputs.tmpl }}", "{{ now }}"},
		{"template-looking data in mixed text", "x={{ .inputs.tmpl }}", "x={{ now }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			got, err := tpl.Eval(semEnv())
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestInterpolation(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"literal", "plain text", "plain text"},
		{"literal with single braces", "{ not an expr }", "{ not an expr }"},
		{"closing braces alone are text", "a }} b", "a }} b"},
		{"string as-is", "Hi {{ .inputs.s }}!", "Hi Hello!"},
		{"null renders empty", "[{{ .inputs.none }}]", "[]"},
		{"numbers render like JSON", "{{ .inputs.n }}/{{ 0.5 }}/{{ 1e21 }}/{{ 1e-7 }}", "3/0.5/1e+21/1e-7"},
		{"bool", "{{ .inputs.t }}", true},
		{"bool in text", "ok={{ .inputs.t }}", "ok=true"},
		{"list as JSON", "l={{ .inputs.strs }}", `l=["a","b"]`},
		{"object as JSON", "o={{ .inputs.obj.nested }}", `o={"x":[10,20]}`},
		{"two expressions", "{{ .inputs.s }}{{ .inputs.s }}", "HelloHello"},
		{"surrounding whitespace keeps the value", "  {{ .inputs.n }}\n", 3.0},
		{"braces inside string literal", "{{ '}}' ~ '{{' }}", "}}{{"},
		{"literal braces via string", "use {{ '{{' }} .x }}", "use {{ .x }}"},
		{"jinja statements are text", "{% if x %}y{% endif %}", "{% if x %}y{% endif %}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			got, err := tpl.Eval(semEnv())
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		offset int
		msg    string
	}{
		{"division by zero", "{{ 1 / 0 }}", 5, "division by zero"},
		{"modulo by zero", "{{ 1 % 0 }}", 5, "modulo by zero"},
		{"overflow", "{{ 1e308 * 10 }}", 9, "overflow"},
		{"string minus", "{{ 'a' - 1 }}", 7, "cannot be applied to string and number"},
		{"string times", "{{ 'a' * 3 }}", 7, "cannot be applied"},
		{"null plus", "{{ .inputs.none + 1 }}", 16, "null and number"},
		{"ordering mixed", "{{ 'a' < 1 }}", 7, "cannot compare string with number"},
		{"ordering lists", "{{ [1] < [2] }}", 7, "cannot compare"},
		{"in number", "{{ 1 in 2 }}", 5, "right side of in"},
		{"in string with number", "{{ 1 in 'abc' }}", 5, "left side of in"},
		{"in object with number", "{{ 1 in .inputs.obj }}", 5, "object keys are strings"},
		{"unary minus string", "{{ -'a' }}", 3, "needs a number"},
		{"len of number", "{{ len(3) }}", 3, "len needs"},
		{"lower of list", "{{ .inputs.list | lower }}", 18, "needs a string"},
		{"map of string", "{{ 'abc' | map('x') }}", 11, "needs a list"},
		{"map bad field", "{{ .inputs.list | map(1) }}", 18, "field name"},
		{"keys of list", "{{ keys(.inputs.list) }}", 3, "keys needs an object"},
		{"date garbage", "{{ 'yesterday' | date('2006') }}", 17, "not an RFC3339"},
		{"int garbage", "{{ int('x') }}", 3, "not a number"},
		{"secret", "{{ .secrets.x }}", 0, "cannot be evaluated"},
		{"now without clock", "{{ now }}", 3, "no clock"},
		{"unsupported host type", "{{ .inputs.host }}", 3, "unsupported type"},
		{"offset in second expression", "a {{ 1 }} b {{ 2 / 0 }}", 17, "division by zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			env := semEnv()
			env.Inputs["host"] = struct{ Secret string }{"x"}
			if tt.name == "now without clock" {
				env.Now = time.Time{}
			}
			_, err = tpl.Eval(env)
			var ee *EvalError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tt.offset, ee.Offset, ee.Error())
			require.Contains(t, ee.Msg, tt.msg)
			require.NotErrorIs(t, err, ErrLimit)
		})
	}
}

func TestTruthy(t *testing.T) {
	tests := []struct {
		v    any
		want bool
	}{
		{nil, false}, {false, false}, {true, true}, {0.0, false}, {0, false}, {int64(0), false},
		{-1.0, true}, {1, true}, {"", false}, {"0", true}, {"false", true},
		{[]any{}, false}, {[]any{nil}, true}, {map[string]any{}, false}, {map[string]any{"a": nil}, true},
		{[]string{}, false}, {map[string]string{"a": "b"}, true},
		{[]any(nil), false}, {map[string]any(nil), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Truthy(tt.v), "%#v", tt.v)
	}
}

func TestEvalBool(t *testing.T) {
	tests := []struct {
		src     string
		want    bool
		wantErr bool
	}{
		{"{{ .inputs.s }}", true, false},
		{"{{ .inputs.none }}", false, false},
		{"{{ .inputs.ghost.deep.path }}", false, false},
		{"{{ .steps.ghost.output.x == 'y' }}", false, false},
		{"{{ not .steps.ghost.status }}", true, false},
		{"  {{ .inputs.t }}  ", true, false},
		{"true", false, true},                            // not an expression
		{"{{ .inputs.t }} {{ .inputs.t }}", false, true}, // two expressions
		{"{{ 1 / 0 }}", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			got, err := tpl.EvalBool(semEnv())
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestEvalString(t *testing.T) {
	tpl, err := Parse("{{ .inputs.n }}")
	require.NoError(t, err)
	s, err := tpl.EvalString(semEnv())
	require.NoError(t, err)
	require.Equal(t, "3", s)

	tpl, err = Parse("{{ .inputs.none }}")
	require.NoError(t, err)
	s, err = tpl.EvalString(semEnv())
	require.NoError(t, err)
	require.Empty(t, s)
}

func TestNilEnv(t *testing.T) {
	tpl, err := Parse("{{ .inputs.x or .steps.y.status or 'fallback' }}")
	require.NoError(t, err)
	got, err := tpl.Eval(nil)
	require.NoError(t, err)
	require.Equal(t, "fallback", got)
}
