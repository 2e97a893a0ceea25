package main

import (
	"regexp"
	"strconv"
	"strings"
)

// Entity is one span the extractor recognised.
type Entity struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

// Result is the tool's output.
type Result struct {
	CustomerID *string   `json:"customer_id"`
	Amount     *float64  `json:"amount"`
	Currency   string    `json:"currency,omitempty"`
	Amounts    []float64 `json:"amounts"`
	IssueType  string    `json:"issue_type"`
	Entities   []Entity  `json:"entities"`
}

var (
	// Customer ids look like C-7890 (one to three capitals, a dash, digits).
	customerRe = regexp.MustCompile(`\b([A-Z]{1,3}-\d{3,8})\b`)
	// A customer-id cue close before the id makes it preferred over, say, an
	// invoice number like INV-2024-0312.
	customerCueRe = regexp.MustCompile(`(?i)(customer|client|account)\s*(id|number|no\.?|#)?\s*(is|:)?\s*$`)
	moneyRe       = regexp.MustCompile(`(?:([$€£])\s?(\d{1,3}(?:,\d{3})*(?:\.\d{1,2})?|\d+(?:\.\d{1,2})?))|(?:\b(\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d+(?:\.\d{1,2})?)\s?(USD|EUR|GBP|dollars|euros)\b)`)
	invoiceRe     = regexp.MustCompile(`\bINV-[0-9-]+\b`)
)

// issueRules are checked in order; the first whose words occur wins, so a
// billing complaint that also mentions an error page stays a billing error.
var issueRules = []struct {
	issue string
	words []string
}{
	{"billing_error", []string{"bill", "billing", "billed", "charge", "charged", "overcharg", "invoice", "refund", "payment"}},
	{"technical_issue", []string{"crash", "error", "bug", "broken", "not working", "freez", "fails"}},
	{"shipping_issue", []string{"deliver", "shipping", "shipment", "parcel", "package", "tracking"}},
	{"account_issue", []string{"password", "login", "log in", "locked", "account access"}},
}

var currencies = map[string]string{"$": "USD", "€": "EUR", "£": "GBP", "usd": "USD", "dollars": "USD", "eur": "EUR", "euros": "EUR", "gbp": "GBP"}

// Extract runs every rule over text.
func Extract(text string) Result {
	res := Result{IssueType: classify(text), Amounts: []float64{}, Entities: []Entity{}}

	invoices := invoiceRe.FindAllStringIndex(text, -1)
	insideInvoice := func(start int) bool {
		for _, iv := range invoices {
			if start >= iv[0] && start < iv[1] {
				return true
			}
		}
		return false
	}
	for _, m := range customerRe.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[2], m[3]
		if insideInvoice(start) {
			continue
		}
		id := text[start:end]
		res.Entities = append(res.Entities, Entity{Type: "customer_id", Text: id, Start: start, End: end})
		cued := customerCueRe.MatchString(text[max(0, start-40):start])
		if res.CustomerID == nil || cued {
			res.CustomerID = &id
		}
	}
	for _, iv := range invoices {
		res.Entities = append(res.Entities, Entity{Type: "invoice_id", Text: text[iv[0]:iv[1]], Start: iv[0], End: iv[1]})
	}
	for _, m := range moneyRe.FindAllStringSubmatchIndex(text, -1) {
		var num, cur string
		if m[2] >= 0 {
			cur, num = text[m[2]:m[3]], text[m[4]:m[5]]
		} else {
			num, cur = text[m[6]:m[7]], text[m[8]:m[9]]
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
		if err != nil {
			continue
		}
		res.Amounts = append(res.Amounts, v)
		res.Entities = append(res.Entities, Entity{Type: "money", Text: text[m[0]:m[1]], Start: m[0], End: m[1]})
		if res.Amount == nil {
			// The first amount is the one the customer disputes: complaints
			// lead with what they were charged, then what they expected.
			amount := v
			res.Amount = &amount
			res.Currency = currencies[strings.ToLower(cur)]
		}
	}
	return res
}

func classify(text string) string {
	lower := strings.ToLower(text)
	for _, r := range issueRules {
		for _, w := range r.words {
			if strings.Contains(lower, w) {
				return r.issue
			}
		}
	}
	return "general_inquiry"
}
