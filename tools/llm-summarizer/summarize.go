package main

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Doc is one input document.
type Doc struct {
	Title       string `json:"title"`
	Content     string `json:"content"`
	Description string `json:"description"`
}

// Options are what the prompt asks for.
type Options struct {
	N        int // number of insights
	MaxWords int // per explanation; 0 = unlimited
}

// Insight is one extracted point.
type Insight struct {
	Title       string `json:"title"`
	Explanation string `json:"explanation"`
	Source      int    `json:"source"` // index of the document it came from
}

// Result is a summary.
type Result struct {
	Insights  []Insight
	Sentences int
}

// Markdown renders the insights as "- [Title]: explanation" lines.
func (r Result) Markdown() string {
	lines := make([]string, len(r.Insights))
	for i, in := range r.Insights {
		lines[i] = "- [" + in.Title + "]: " + in.Explanation
	}
	return strings.Join(lines, "\n")
}

var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}

const num = `(\d+|one|two|three|four|five|six|seven|eight|nine|ten)`

var (
	exactlyRe  = regexp.MustCompile(`(?i)\bexactly\s+` + num + `\b`)
	countRe    = regexp.MustCompile(`(?i)\b` + num + `\s+(?:\w+\s+){0,2}(?:insights|points|bullets|bullet points|sentences|takeaways|ideas|items|highlights)\b`)
	maxWordsRe = regexp.MustCompile(`(?i)\b(?:max(?:imum)?|at most|no more than|up to|under)\s+` + num + `\s+words\b|\b` + num + `\s+words\s+(?:or\s+(?:less|fewer)|max(?:imum)?)\b`)
)

// ParsePrompt reads the insight count and word limit out of an instruction;
// defaults are 3 insights and no word limit.
func ParsePrompt(prompt string) Options {
	o := Options{N: 3}
	if m := exactlyRe.FindStringSubmatch(prompt); m != nil {
		o.N = atoi(m[1])
	} else if m := countRe.FindStringSubmatch(prompt); m != nil {
		o.N = atoi(m[1])
	}
	if m := maxWordsRe.FindStringSubmatch(prompt); m != nil {
		if m[1] != "" {
			o.MaxWords = atoi(m[1])
		} else {
			o.MaxWords = atoi(m[2])
		}
	}
	return o
}

func atoi(s string) int {
	if n, ok := numberWords[strings.ToLower(s)]; ok {
		return n
	}
	n, _ := strconv.Atoi(s)
	return n
}

type sentence struct {
	text  string
	doc   int
	pos   int // position within its document
	words []string
	score float64
}

// Summarize picks opts.N sentences: score = mean normalised corpus frequency
// of the sentence's content words, plus a bonus for a document's lead
// sentence (news puts the point first). At most one sentence per document
// while unused documents remain, and near-duplicates are skipped.
func Summarize(docs []Doc, opts Options) Result {
	var sents []sentence
	freq := map[string]float64{}
	docFreq := map[string]int{}
	docWords := make([]map[string]int, len(docs))
	for d, doc := range docs {
		docWords[d] = map[string]int{}
		for p, s := range SplitSentences(doc.Content) {
			ws := contentWords(s)
			if len(ws) < 3 {
				continue // headlines fragments and sign-offs say nothing
			}
			sents = append(sents, sentence{text: s, doc: d, pos: p, words: ws})
			for _, w := range ws {
				freq[w]++
				if docWords[d][w] == 0 {
					docFreq[w]++
				}
				docWords[d][w]++
			}
		}
	}
	var maxF float64
	for _, f := range freq {
		maxF = max(maxF, f)
	}
	for i := range sents {
		var sum float64
		for _, w := range sents[i].words {
			sum += freq[w] / maxF
		}
		sents[i].score = sum / float64(len(sents[i].words))
		if sents[i].pos == 0 {
			sents[i].score += 0.25
		}
	}
	order := make([]int, len(sents))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return sents[order[a]].score > sents[order[b]].score })

	var picked []int
	usedDoc := map[int]bool{}
	docsLeft := func() bool { return len(usedDoc) < len(docWords) }
	for pass := 0; pass < 2 && len(picked) < opts.N; pass++ {
		for _, i := range order {
			if len(picked) == opts.N {
				break
			}
			s := sents[i]
			if contains(picked, i) || (pass == 0 && usedDoc[s.doc] && docsLeft()) || nearDuplicate(s, picked, sents) {
				continue
			}
			picked = append(picked, i)
			usedDoc[s.doc] = true
		}
	}
	res := Result{Sentences: len(sents)}
	for _, i := range picked {
		s := sents[i]
		title := docs[s.doc].Title
		if title == "" {
			title = keywordTitle(s, docWords[s.doc], docFreq, len(docs))
		}
		res.Insights = append(res.Insights, Insight{Title: title, Explanation: truncateWords(s.text, opts.MaxWords), Source: s.doc})
	}
	return res
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func nearDuplicate(s sentence, picked []int, sents []sentence) bool {
	set := map[string]bool{}
	for _, w := range s.words {
		set[w] = true
	}
	for _, i := range picked {
		other := map[string]bool{}
		for _, w := range sents[i].words {
			other[w] = true
		}
		inter := 0
		for w := range set {
			if other[w] {
				inter++
			}
		}
		union := len(set) + len(other) - inter
		if union > 0 && float64(inter)/float64(union) > 0.6 {
			return true
		}
	}
	return false
}

// keywordTitle names an insight by the sentence's most distinctive words
// (tf-idf against the other documents), kept in sentence order.
func keywordTitle(s sentence, tf map[string]int, df map[string]int, ndocs int) string {
	type kw struct {
		w     string
		score float64
		at    int
	}
	seen := map[string]bool{}
	var kws []kw
	for i, w := range s.words {
		if seen[w] {
			continue
		}
		seen[w] = true
		kws = append(kws, kw{w, float64(tf[w]) * math.Log(1+float64(ndocs)/float64(df[w])), i})
	}
	sort.SliceStable(kws, func(a, b int) bool { return kws[a].score > kws[b].score })
	if len(kws) > 3 {
		kws = kws[:3]
	}
	sort.Slice(kws, func(a, b int) bool { return kws[a].at < kws[b].at })
	// Keep the author's casing where it has capitals (RISC-V, OpenAI).
	orig := map[string]string{}
	for _, w := range wordRe.FindAllString(s.text, -1) {
		if lw := strings.ToLower(w); lw != w && orig[lw] == "" {
			orig[lw] = w
		}
	}
	parts := make([]string, len(kws))
	for i, k := range kws {
		if o := orig[k.w]; o != "" {
			parts[i] = o
		} else {
			parts[i] = titleCase(k.w)
		}
	}
	return strings.Join(parts, " ")
}

func titleCase(w string) string {
	r := []rune(w)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

func truncateWords(s string, n int) string {
	words := strings.Fields(s)
	if n <= 0 || len(words) <= n {
		return s
	}
	out := strings.TrimRight(strings.Join(words[:n], " "), ",;:-—")
	return out + "…"
}

// SplitSentences splits on . ! ? followed by space and an upper-case letter,
// digit or quote, which keeps "$1.5 billion" and "e.g. this" whole.
func SplitSentences(text string) []string {
	text = strings.Join(strings.Fields(text), " ")
	var out []string
	start := 0
	rs := []rune(text)
	for i := 0; i < len(rs); i++ {
		if rs[i] != '.' && rs[i] != '!' && rs[i] != '?' {
			continue
		}
		j := i + 1
		for j < len(rs) && (rs[j] == '"' || rs[j] == '\'' || rs[j] == ')' || rs[j] == '”') {
			j++
		}
		if j >= len(rs) {
			break
		}
		if rs[j] != ' ' || j+1 >= len(rs) {
			continue
		}
		next := rs[j+1]
		if unicode.IsUpper(next) || unicode.IsDigit(next) || next == '"' || next == '“' {
			if s := strings.TrimSpace(string(rs[start:j])); s != "" {
				out = append(out, s)
			}
			start = j + 1
		}
	}
	if s := strings.TrimSpace(string(rs[start:])); s != "" {
		out = append(out, s)
	}
	return out
}

var wordRe = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}'’-]*`)

func contentWords(s string) []string {
	var out []string
	for _, w := range wordRe.FindAllString(strings.ToLower(s), -1) {
		w = strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s"), "-")
		if len([]rune(w)) < 3 || stopwords[w] {
			continue
		}
		out = append(out, w)
	}
	return out
}

var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`about above after again against all also although among and any are aren't because been before
being below between both but can cannot could did does doing down during each even ever every far few for from further
had has have having her here hers herself him himself his how however into its itself just least less let like made
make many may more most much must near new next nor not now off once one only other our ours out over own per
rather said same say says she should since some still such than that the their theirs them then there these they
this those though through too under until upon very was were what when where which while who whom why will with
within without would yet you your yours company companies year years last first two three new says according
percent people also already since among via`) {
		m[w] = true
	}
	return m
}()
