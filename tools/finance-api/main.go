// Command finance-api is the complaint-handler demo's stand-in for the
// finance system: it checks a disputed amount against a ledger compiled into
// the binary. A confirmed overcharge yields a compensation plan; anything it
// cannot confirm (unknown customer, no such invoice, no overcharge) is an
// error, which sends the seed spec down its human-review branch.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

//go:embed ledger.json
var ledgerJSON []byte

var tool = toolkit.Tool{
	Name:    "finance-api",
	Version: version,
	Summary: "validate a billing dispute against the ledger and propose compensation (offline stand-in)",
	Usage: `Input:  {"customer_id": "C-7890", "amount": 129.99}   (amount may be a numeric string; omitted = latest invoice)
Output: {"customer_id", "invoice_id", "charged", "plan_price", "overcharge", "currency", "compensation_plan", "refund", "credit"}
Error:  unknown customer, no invoice of that amount, or no overcharge.
Embedded ledger: C-7890 (overcharged 30.00 on INV-2024-0312), C-4521 (correctly billed), C-1001 (double charge in June).`,
}

type input struct {
	CustomerID toolkit.Text   `json:"customer_id"`
	Amount     toolkit.Number `json:"amount"`
}

type invoice struct {
	ID     string  `json:"id"`
	Period string  `json:"period"`
	Amount float64 `json:"amount"`
}

type account struct {
	Name      string    `json:"name"`
	Plan      string    `json:"plan"`
	PlanPrice float64   `json:"plan_price"`
	Currency  string    `json:"currency"`
	Invoices  []invoice `json:"invoices"`
}

// Decision is the tool's output for a confirmed overcharge.
type Decision struct {
	CustomerID       string  `json:"customer_id"`
	InvoiceID        string  `json:"invoice_id"`
	Charged          float64 `json:"charged"`
	PlanPrice        float64 `json:"plan_price"`
	Overcharge       float64 `json:"overcharge"`
	Currency         string  `json:"currency"`
	Refund           float64 `json:"refund"`
	Credit           float64 `json:"credit"`
	CompensationPlan string  `json:"compensation_plan"`
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	ledger, err := loadLedger(ledgerJSON)
	if err != nil {
		return nil, err
	}
	d, err := Validate(ledger, string(in.CustomerID), in.Amount)
	if err != nil {
		return nil, err
	}
	env.Log.Info("overcharge confirmed", "invoice_id", d.InvoiceID, "overcharge", d.Overcharge)
	return d, nil
}

func loadLedger(data []byte) (map[string]account, error) {
	var l map[string]account
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("parse ledger: %w", err)
	}
	return l, nil
}

// Validate applies the rule: the disputed amount must match an invoice of a
// known customer and exceed the plan price. The refund is the overcharge; a
// goodwill credit of 10% of the plan price (rounded to cents) is added.
func Validate(ledger map[string]account, customerID string, amount toolkit.Number) (Decision, error) {
	id := strings.ToUpper(strings.TrimSpace(customerID))
	if id == "" || id == "NULL" {
		return Decision{}, toolkit.BadInput("customer_id is required")
	}
	acct, ok := ledger[id]
	if !ok {
		return Decision{}, fmt.Errorf("customer %s not found in ledger", id)
	}
	if len(acct.Invoices) == 0 {
		return Decision{}, fmt.Errorf("customer %s has no invoices", id)
	}
	inv := acct.Invoices[len(acct.Invoices)-1]
	if amount.Set {
		found := false
		for _, i := range acct.Invoices {
			if math.Abs(i.Amount-amount.Value) < 0.005 {
				inv, found = i, true // the latest matching invoice
			}
		}
		if !found {
			return Decision{}, fmt.Errorf("no invoice of %.2f %s for customer %s", amount.Value, acct.Currency, id)
		}
	}
	over := cents(inv.Amount - acct.PlanPrice)
	if over <= 0 {
		return Decision{}, fmt.Errorf("invoice %s of %.2f %s matches the %s plan price: no overcharge", inv.ID, inv.Amount, acct.Currency, acct.Plan)
	}
	credit := cents(acct.PlanPrice * 0.10)
	return Decision{
		CustomerID: id, InvoiceID: inv.ID, Charged: inv.Amount, PlanPrice: acct.PlanPrice,
		Overcharge: over, Currency: acct.Currency, Refund: over, Credit: credit,
		CompensationPlan: fmt.Sprintf(
			"Dear %s,\n\nwe reviewed invoice %s (%s) and confirm you were charged %.2f %s instead of the %s plan price of %.2f %s. "+
				"We will refund the difference of %.2f %s to your original payment method within 5 business days, "+
				"and we have added a goodwill credit of %.2f %s to your next invoice.\n\nWe apologise for the inconvenience.\nBilling Support",
			acct.Name, inv.ID, inv.Period, inv.Amount, acct.Currency, acct.Plan, acct.PlanPrice, acct.Currency,
			over, acct.Currency, credit, acct.Currency),
	}, nil
}

func cents(v float64) float64 { return math.Round(v*100) / 100 }
