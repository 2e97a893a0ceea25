package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// dialUntil waits out a server that does not answer yet, but not a
// certificate failure or a usage error, and never past its wait.
func TestDialUntil(t *testing.T) {
	unreachable := &ExitError{Code: ExitFailure, Err: errors.New("cannot reach Temporal at temporal:7233: connection refused")}
	badCA := &ExitError{Code: ExitFailure, Err: errors.New("cannot reach Temporal: tls: failed to verify certificate: x509: certificate signed by unknown authority")}
	usage := &ExitError{Code: ExitInvalid, Err: errors.New("--tls-cert and --tls-key go together")}
	for _, tc := range []struct {
		name      string
		errs      []error // the dial results in order; nil = connected
		wait      time.Duration
		wantDials int
		wantErr   error
	}{
		{"answers at once", []error{nil}, time.Minute, 1, nil},
		{"answers on the third try", []error{unreachable, unreachable, nil}, time.Minute, 3, nil},
		{"no wait: one try", []error{unreachable, nil}, 0, 1, unreachable},
		{"certificate failure is not waited out", []error{badCA, nil}, time.Minute, 1, badCA},
		{"usage error is not waited out", []error{usage, nil}, time.Minute, 1, usage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dials := 0
			dial := func(context.Context) (client.Client, error) {
				err := tc.errs[dials]
				dials++
				return nil, err
			}
			_, err := dialUntil(context.Background(), dial, tc.wait, time.Millisecond)
			require.Equal(t, tc.wantErr, err)
			require.Equal(t, tc.wantDials, dials)
		})
	}
}

// A wait that runs out returns the last dial error.
func TestDialUntilGivesUp(t *testing.T) {
	want := &ExitError{Code: ExitFailure, Err: errors.New("connection refused")}
	dials := 0
	_, err := dialUntil(context.Background(), func(context.Context) (client.Client, error) {
		dials++
		return nil, want
	}, 20*time.Millisecond, time.Millisecond)
	require.Equal(t, want, err)
	require.Greater(t, dials, 1)
}
