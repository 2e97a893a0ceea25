package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

const seedPrompt = `You are a senior tech journalist. Extract exactly 3 key insights from the following news articles.
Format each insight as: - [Insight title]: [Concise explanation, max 20 words].
Do not add introduction or conclusion.`

func TestParsePrompt(t *testing.T) {
	tests := []struct {
		prompt string
		want   Options
	}{
		{prompt: seedPrompt, want: Options{N: 3, MaxWords: 20}},
		{prompt: "Give me five key takeaways, at most 12 words each", want: Options{N: 5, MaxWords: 12}},
		{prompt: "List 2 bullet points. 15 words or fewer.", want: Options{N: 2, MaxWords: 15}},
		{prompt: "Summarize.", want: Options{N: 3}},
		{prompt: "exactly ten insights, no more than 8 words", want: Options{N: 10, MaxWords: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			require.Equal(t, tt.want, ParsePrompt(tt.prompt))
		})
	}
}

func TestSplitSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{in: "It raised $1.5 billion. Investors cheered! Why? 2024 was big.", want: []string{"It raised $1.5 billion.", "Investors cheered!", "Why?", "2024 was big."}},
		{in: "Use tools e.g. this one. Done", want: []string{"Use tools e.g. this one.", "Done"}},
		{in: "He said \"no.\" Then left.", want: []string{"He said \"no.\"", "Then left."}},
		{in: "  ", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			require.Equal(t, tt.want, SplitSentences(tt.in))
		})
	}
}

var bulletRe = regexp.MustCompile(`^- \[[^\]]+\]: \S.*$`)

func TestSummarize(t *testing.T) {
	docs := []Doc{
		{Content: "Battery storage is the bottleneck for renewable grids. Storage projects need grid connections. Lunch was nice."},
		{Content: "Grid operators want more battery storage for renewable power. Prices fell."},
		{Content: "Passkeys replace passwords on many sites. Phishing gets harder with passkeys stored on devices."},
		{Content: "Short."},
	}
	tests := []struct {
		name     string
		opts     Options
		wantN    int
		wantDocs []int // sources, in pick order
		maxWords int
	}{
		{name: "three from distinct documents", opts: Options{N: 3}, wantN: 3, wantDocs: []int{0, 1, 2}},
		{name: "one", opts: Options{N: 1}, wantN: 1},
		{name: "more than documents reuses documents", opts: Options{N: 5}, wantN: 5},
		{name: "word limit", opts: Options{N: 2, MaxWords: 4}, wantN: 2, maxWords: 4},
		{name: "more than there are sentences", opts: Options{N: 40}, wantN: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Summarize(docs, tt.opts)
			require.Len(t, res.Insights, tt.wantN)
			if tt.wantDocs != nil {
				var got []int
				for _, in := range res.Insights {
					got = append(got, in.Source)
				}
				require.ElementsMatch(t, tt.wantDocs, got)
			}
			for _, line := range strings.Split(res.Markdown(), "\n") {
				require.Regexp(t, bulletRe, line)
			}
			if tt.maxWords > 0 {
				for _, in := range res.Insights {
					require.LessOrEqual(t, len(strings.Fields(in.Explanation)), tt.maxWords)
					require.True(t, strings.HasSuffix(in.Explanation, "…"))
				}
			}
			// Deterministic: same input, same output.
			require.Equal(t, res, Summarize(docs, tt.opts))
		})
	}
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		wantCode int
		wantN    int
		wantErr  string
	}{
		{name: "joined string as the seed spec renders it", stdin: mustJSON(map[string]any{"texts": "Storage matters for grids today.\n\nPasskeys stop phishing attacks well.\n\nRobots now come on subscription plans.\n\nChips go open with RISC-V designs.", "prompt": seedPrompt}), wantN: 3},
		{name: "list of items with titles", stdin: `{"texts":[{"title":"A","content":"Alpha beta gamma delta."},{"title":"B","content":"Epsilon zeta eta theta."}],"n":2}`, wantN: 2},
		{name: "n overrides prompt", stdin: `{"texts":["Alpha beta gamma delta.","Epsilon zeta eta theta."],"prompt":"exactly 3 insights","n":1}`, wantN: 1},
		{name: "missing texts", stdin: `{"prompt":"x"}`, wantCode: 2, wantErr: "texts is required"},
		{name: "number texts", stdin: `{"texts":42}`, wantCode: 2, wantErr: "string or a list"},
		{name: "no sentences", stdin: `{"texts":"ok"}`, wantCode: 2, wantErr: "no sentences"},
		{name: "n out of range", stdin: `{"texts":"a b c d.","n":0}`, wantCode: 2, wantErr: "between 1 and"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(tt.stdin), Stdout: &out, Stderr: &bytes.Buffer{}}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			var got struct {
				Summary  string    `json:"summary"`
				Insights []Insight `json:"insights"`
				Error    string    `json:"error"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got.Error, tt.wantErr)
				return
			}
			require.Empty(t, got.Error)
			require.Len(t, got.Insights, tt.wantN)
			require.Len(t, strings.Split(got.Summary, "\n"), tt.wantN)
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
