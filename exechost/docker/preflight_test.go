package docker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPreflightReportErr: a failed check fails the report, a skipped one
// does not (it is stated, not passed: OK stays false).
func TestPreflightReportErr(t *testing.T) {
	rep := &PreflightReport{Checks: []PreflightCheck{
		{Name: CheckNoCaps, OK: true},
		{Name: CheckSeccomp, Skipped: true, Detail: "not observable under gVisor"},
	}}
	require.NoError(t, rep.Err())
	require.False(t, rep.Check(CheckSeccomp).OK)
	require.Nil(t, rep.Check(CheckKeeperUID))

	rep.Checks = append(rep.Checks, PreflightCheck{Name: CheckKeeperUID, Detail: "PID 1 runs as uid \"1000\""})
	err := rep.Err()
	require.ErrorIs(t, err, ErrPreflight)
	require.Contains(t, err.Error(), CheckKeeperUID)
	require.NotContains(t, err.Error(), CheckSeccomp)
}
