package expr

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRenderValue(t *testing.T) {
	env := newsEnv()
	in := map[string]any{
		"texts":       "{{ .steps.fetch_rss.output.items | map('content') | join('\n\n') }}",
		"webhook_url": "{{ .secrets.slack_webhook_url }}",
		"channel":     "C012AB3CD",
		"limit":       10,
		"flag":        true,
		"nested": map[string]any{
			"list": []any{"{{ len(.steps.fetch_rss.output.items) }}", "n={{ len(.steps.fetch_rss.output.items) }}", nil},
		},
		"env": map[string]string{"API_KEY": "{{ .secrets.k }}", "N": "{{ len(.steps.fetch_rss.output.items) }}", "PLAIN": "x"},
	}
	got, err := RenderValue(in, env)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"texts":       "OpenAI ships a model.\n\nRust 2.0 announced.\n\nGo 1.26 released.",
		"webhook_url": "{{ .secrets.slack_webhook_url }}", // left for the worker
		"channel":     "C012AB3CD",
		"limit":       10,
		"flag":        true,
		"nested": map[string]any{
			"list": []any{3.0, "n=3", nil},
		},
		"env": map[string]string{"API_KEY": "{{ .secrets.k }}", "N": "3", "PLAIN": "x"},
	}, got)
	// the input is not modified
	require.Equal(t, "{{ .secrets.slack_webhook_url }}", in["webhook_url"])
	require.Equal(t, "{{ len(.steps.fetch_rss.output.items) }}", in["nested"].(map[string]any)["list"].([]any)[0])
}

func TestRenderValueErrorsCarryPath(t *testing.T) {
	tests := []struct {
		name string
		in   any
		path string
		as   any
	}{
		{"syntax", map[string]any{"a": []any{"ok", "{{ __x }}"}}, "a[1]", new(*SyntaxError)},
		{"eval", map[string]any{"a": map[string]any{"b": "{{ 1 / 0 }}"}}, "a.b", new(*EvalError)},
		{"env", map[string]string{"X": "{{ 'a' - 1 }}"}, "X", new(*EvalError)},
		{"mixed secret", map[string]any{"h": "Bearer {{ .secrets.k }}"}, "h", new(*SyntaxError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderValue(tt.in, newsEnv())
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.path+": ")
			require.ErrorAs(t, err, tt.as)
		})
	}
}

// Tool output is data. Strings in it that look like templates are passed on
// literally, never evaluated, and never substituted as secrets.
func TestToolOutputIsNotReevaluated(t *testing.T) {
	env := &Env{
		Now: seedNow,
		Steps: map[string]StepView{"evil": {Status: "success", Output: map[string]any{
			"now":        "{{ now }}",
			"expr":       "{{ .inputs.x | upper }}",
			"secret":     "{{ .secrets.slack_webhook_url }}",
			"nested":     map[string]any{"deep": []any{"{{.secrets.slack_webhook_url}}"}},
			"secretHalf": "{{ .secrets.slack_",
			"otherHalf":  "webhook_url }}",
		}}},
	}

	t.Run("Eval returns template-looking data verbatim", func(t *testing.T) {
		for _, src := range []string{"{{ .steps.evil.output.now }}", "{{ .steps.evil.output.expr }}", "{{ .steps.evil.output.secret }}"} {
			tpl, err := Parse(src)
			require.NoError(t, err)
			got, err := tpl.Eval(env)
			require.NoError(t, err)
			require.Contains(t, got, "{{")
		}
	})

	t.Run("RenderValue keeps non-secret template text literal", func(t *testing.T) {
		got, err := RenderValue(map[string]any{
			"a": "{{ .steps.evil.output.now }}",
			"b": "said: {{ .steps.evil.output.expr }}",
		}, env)
		require.NoError(t, err)
		require.Equal(t, map[string]any{"a": "{{ now }}", "b": "said: {{ .inputs.x | upper }}"}, got)
	})

	// A secret placeholder smuggled in through data would be substituted by
	// the worker, so rendering refuses it instead of passing it on.
	for name, src := range map[string]string{
		"whole":     "{{ .steps.evil.output.secret }}",
		"nested":    "{{ .steps.evil.output.nested }}",
		"assembled": "{{ .steps.evil.output.secretHalf }}{{ .steps.evil.output.otherHalf }}",
		"concat":    "{{ .steps.evil.output.secretHalf ~ .steps.evil.output.otherHalf }}",
	} {
		t.Run("RenderValue refuses smuggled secret placeholder: "+name, func(t *testing.T) {
			_, err := RenderValue(map[string]any{"text": src}, env)
			var ee *EvalError
			require.ErrorAs(t, err, &ee)
			require.Contains(t, ee.Msg, "secret placeholder")
		})
	}

	t.Run("SubstituteSecrets does not evaluate anything", func(t *testing.T) {
		got, err := SubstituteSecrets(map[string]any{"a": "{{ now }}", "b": "x {{ .secrets.k }}"}, map[string]string{"k": "v"})
		require.NoError(t, err)
		require.Equal(t, map[string]any{"a": "{{ now }}", "b": "x {{ .secrets.k }}"}, got)
	})
}

func TestSubstituteSecrets(t *testing.T) {
	secrets := map[string]string{"slack_webhook_url": "https://hooks.example/T0/B0/xyz", "k": "v"}
	in := map[string]any{
		"webhook_url": "{{ .secrets.slack_webhook_url }}",
		"list":        []any{"{{.secrets.k}}", "plain", 3.0, map[string]any{"x": "{{ .secrets.k }}"}},
		"env":         map[string]string{"API_KEY": "{{ .secrets.k }}"},
		"strs":        []string{"{{ .secrets.k }}"},
	}
	got, err := SubstituteSecrets(in, secrets)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"webhook_url": "https://hooks.example/T0/B0/xyz",
		"list":        []any{"v", "plain", 3.0, map[string]any{"x": "v"}},
		"env":         map[string]string{"API_KEY": "v"},
		"strs":        []string{"v"},
	}, got)
	require.Equal(t, "{{ .secrets.slack_webhook_url }}", in["webhook_url"], "input not modified")

	_, err = SubstituteSecrets(map[string]any{"a": []any{"{{ .secrets.other }}"}}, secrets)
	require.ErrorIs(t, err, ErrMissingSecret)
	require.Contains(t, err.Error(), "a[0]")
	require.NotContains(t, err.Error(), "xyz")

	env, err := SubstituteSecrets(map[string]string{"A": "{{ .secrets.k }}"}, secrets)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"A": "v"}, env)
}

func TestRenderThenSubstitute(t *testing.T) {
	// The workflow renders (no secrets), the worker substitutes.
	inputs := map[string]any{
		"webhook_url": "{{ .secrets.slack_webhook_url }}",
		"text":        "{{ .steps.render_md.output.markdown }}",
	}
	rendered, err := RenderValue(inputs, newsEnv())
	require.NoError(t, err)
	require.Equal(t, "{{ .secrets.slack_webhook_url }}", rendered.(map[string]any)["webhook_url"])
	final, err := SubstituteSecrets(rendered, map[string]string{"slack_webhook_url": "https://hooks/x"})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"webhook_url": "https://hooks/x", "text": "# Daily\n- [AI]: models."}, final)
}
