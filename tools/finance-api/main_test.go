package main

import (
	"errors"
	"testing"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	ledger, err := loadLedger(ledgerJSON)
	require.NoError(t, err)
	num := func(v float64) toolkit.Number { return toolkit.Number{Value: v, Set: true} }
	tests := []struct {
		name        string
		customer    string
		amount      toolkit.Number
		wantInvoice string
		wantOver    float64
		wantErr     string
		wantInput   bool
	}{
		{name: "seed overcharge", customer: "C-7890", amount: num(129.99), wantInvoice: "INV-2024-0312", wantOver: 30.00},
		{name: "lower-case id", customer: " c-7890 ", amount: num(129.99), wantInvoice: "INV-2024-0312", wantOver: 30.00},
		{name: "double charge, latest invoice", customer: "C-1001", wantInvoice: "INV-2024-0601", wantOver: 19.00},
		{name: "unknown customer", customer: "C-0042", amount: num(49), wantErr: "customer C-0042 not found"},
		{name: "no such invoice", customer: "C-7890", amount: num(10), wantErr: "no invoice of 10.00 USD"},
		{name: "correctly billed", customer: "C-4521", amount: num(1188), wantErr: "no overcharge"},
		{name: "missing id", customer: "", wantErr: "customer_id is required", wantInput: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Validate(ledger, tt.customer, tt.amount)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var ie *toolkit.InputError
				require.Equal(t, tt.wantInput, errors.As(err, &ie))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantInvoice, d.InvoiceID)
			require.InDelta(t, tt.wantOver, d.Overcharge, 1e-9)
			require.Equal(t, d.Overcharge, d.Refund)
			require.Contains(t, d.CompensationPlan, tt.wantInvoice)
		})
	}
}
