package expr

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fuzzEnv() *Env {
	items := make([]any, 500)
	for i := range items {
		items[i] = map[string]any{"content": strings.Repeat("x", i%17), "n": float64(i), "ok": i%2 == 0}
	}
	return &Env{
		Now: time.Date(2024, 6, 15, 9, 0, 0, 0, time.UTC),
		Inputs: map[string]any{
			"a": "Hello {{ now }}", "n": 3, "l": []any{1.0, "b", nil, []any{}}, "o": map[string]any{"k": "v", "_k": "w"},
			"big": strings.Repeat("ab\"", 6000), "secretish": "{{ .secrets.k }}",
		},
		Steps: map[string]StepView{
			"s":     {Status: "success", Output: map[string]any{"items": items, "body": "Body@Corp.com"}},
			"f":     {Status: "failed"},
			"x":     {Status: "skipped"},
			"fetch": {Status: "success", Output: map[string]any{"items": items[:3]}},
		},
	}
}

// FuzzParseEval checks the properties every input must have: no panic,
// typed errors with in-range offsets, results within the limits,
// deterministic evaluation, and agreement between Parse/SecretName and the
// worker's cheap placeholder matcher.
func FuzzParseEval(f *testing.F) {
	for _, tc := range injectionCorpus {
		if len(tc.src) < 4096 {
			f.Add(tc.src)
		}
	}
	for _, s := range []string{
		"{{ .inputs.email_id }}", "{{ .steps.fetch_email.output.body }}",
		"{{ .steps.validate_billing.status == 'failed' }}",
		"{{ .steps.send_compensation.status or .steps.escalate_to_human.status }}",
		"{{ .steps.fetch_rss.output.items | map('content') | join('\\n\\n') }}",
		`{{ now | date "2006-01-02" }}`, "{{ len(.steps.summarize_news.output.summary) }}",
		`{{ .steps.fetch_email.output.sender | lower | replace("@corp.com", "@company.com") }}`,
		"{{ .secrets.slack_webhook_url }}", "x {{ .inputs.l[1] ~ .inputs.n }} y",
		"{{ .steps.s.output.items | filter('ok') | map('content') | join(',') | len }}",
		"{{ .inputs.big | replace('a', 'aa') | json }}", "{{ [1, 'a', null, true] | json }}",
		"{{ .inputs.o | keys }}{{ .inputs.a }}", "{{ .steps.s.output.items[-1].n % 7 }}",
	} {
		f.Add(s)
	}
	env := fuzzEnv()
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src)
		name, isPlaceholder := secretPlaceholder(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse error is %T, want *SyntaxError: %v", err, err)
			}
			if se.Offset < 0 || se.Offset > len(src) {
				t.Fatalf("offset %d out of range [0,%d]", se.Offset, len(src))
			}
			if isPlaceholder {
				t.Fatalf("placeholder matcher accepted %q that Parse rejects: %v", src, err)
			}
			return
		}
		if got, ok := tpl.SecretName(); ok != isPlaceholder || got != name {
			t.Fatalf("SecretName=(%q,%v) but placeholder matcher=(%q,%v) for %q", got, ok, name, isPlaceholder, src)
		}
		for _, r := range tpl.Refs() {
			if r.Offset < 0 || !strings.HasPrefix(src[r.Offset:], "."+r.Root+".") {
				t.Fatalf("ref %+v does not point at its root in %q", r, src)
			}
		}
		v1, err1 := tpl.Eval(env)
		v2, err2 := tpl.Eval(env)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("non-deterministic evaluation of %q: %v/%v vs %v/%v", src, v1, err1, v2, err2)
		}
		if err1 != nil {
			var ee *EvalError
			if !errors.As(err1, &ee) {
				t.Fatalf("Eval error is %T, want *EvalError: %v", err1, err1)
			}
			if ee.Offset < 0 || ee.Offset > len(src) {
				t.Fatalf("eval offset %d out of range", ee.Offset)
			}
			return
		}
		switch x := v1.(type) {
		case string:
			if len(x) > MaxResultBytes+len(src) {
				t.Fatalf("result of %d bytes exceeds the limit", len(x))
			}
		case []any:
			if len(x) > MaxCollectionLen {
				t.Fatalf("list of %d elements exceeds the limit", len(x))
			}
		}
		if tpl.IsLiteral() && v1 != src {
			t.Fatalf("literal %q evaluated to %v", src, v1)
		}
		if tpl.IsSingleExpr() {
			if _, err := tpl.EvalBool(env); err != nil {
				t.Fatalf("EvalBool failed where Eval succeeded: %v", err)
			}
		}
	})
}
