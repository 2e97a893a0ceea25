package spec

import "strings"

// suggest returns the candidate closest to s when it is close enough to be
// a plausible typo ("tiemout" -> "timeout"), else "".
func suggest(s string, candidates []string) string {
	best, bestDist := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := levenshtein(ls, strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := max(1, min(3, len(s)/3))
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// levenshtein counts single-character edits; an adjacent transposition
// counts as one edit (Damerau), the most common typo.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 30 // not a typo of a field name; keep this O(1) on hostile input
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
