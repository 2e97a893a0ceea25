package expr

import (
	"strings"
	"testing"
)

func TestParseSecretText(t *testing.T) {
	ok := map[string][]string{
		"plain":                       nil,
		"Bearer {{ .secrets.token }}": {"token"},
		"{{.secrets.a}}:{{ .secrets.b }}{{.secrets.a}}": {"a", "b"},
		"": nil,
	}
	for s, want := range ok {
		got, err := ParseSecretText(s)
		if err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("ParseSecretText(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{
		"{{ .inputs.x }}", "Bearer {{ .secrets.token | upper }}", "{{ .secrets.token }} {{ now }}",
		"{{ .secrets }}", "{{ .secrets.9x }}", "a }} b", "{{ .secrets.a", "{{{ .secrets.a }}}", "{{ .steps.a.output.x }}",
	} {
		if _, err := ParseSecretText(s); err == nil {
			t.Errorf("ParseSecretText(%q) = nil error", s)
		}
	}
}

func TestSubstituteSecretText(t *testing.T) {
	got, err := SubstituteSecretText("Bearer {{ .secrets.t }}/{{.secrets.u}}", map[string]string{"t": "T0K", "u": "{{ .secrets.t }}"})
	if err != nil || got != "Bearer T0K/{{ .secrets.t }}" {
		t.Fatalf("got %q, %v (values are not substituted again)", got, err)
	}
	_, err = SubstituteSecretText("{{ .secrets.missing }}", map[string]string{"t": "SECRET"})
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err = %v", err)
	}
}
