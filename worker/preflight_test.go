package worker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePreflightMode(t *testing.T) {
	for in, want := range map[string]PreflightMode{"": PreflightEnforce, "enforce": PreflightEnforce, "warn": PreflightWarn, "off": PreflightOff} {
		got, err := ParsePreflightMode(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"Enforce", "skip", "no", " off"} {
		_, err := ParsePreflightMode(bad)
		require.Error(t, err, bad)
	}
}
