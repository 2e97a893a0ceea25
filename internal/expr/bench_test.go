package expr

import "testing"

func BenchmarkParseSeed(b *testing.B) {
	src := `{{ .steps.fetch_email.output.sender | lower | replace("@corp.com", "@company.com") }}`
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalSeed(b *testing.B) {
	tpl, err := Parse("{{ .steps.fetch_rss.output.items | map('content') | join('\n\n') }}")
	if err != nil {
		b.Fatal(err)
	}
	env := newsEnv()
	for b.Loop() {
		if _, err := tpl.Eval(env); err != nil {
			b.Fatal(err)
		}
	}
}
