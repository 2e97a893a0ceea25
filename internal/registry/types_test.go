package registry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

var testDataConverter = converter.GetDefaultDataConverter()

func TestValidateImageRef(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		ref  string
		ok   bool
		want string
	}{
		{ref: "sha256:" + hex, ok: true},
		{ref: "agentflow/tool-echo@sha256:" + hex, ok: true},
		{ref: "registry.local:5000/team/echo@sha256:" + hex, ok: true},
		{ref: "echo@sha256:" + hex, ok: true},
		{ref: "agentflow/tool-echo:1.0", want: "not digest-pinned"},
		{ref: "agentflow/tool-echo", want: "not digest-pinned"},
		{ref: "", want: "not digest-pinned"},
		{ref: "sha256:" + hex[:63], want: "malformed digest"},
		{ref: "sha256:" + strings.ToUpper(hex), want: "malformed digest"},
		{ref: "echo@sha256:xyz", want: "malformed digest"},
		{ref: "Echo@sha256:" + hex, want: "malformed digest"},
		{ref: "echo:1.0@sha256:" + hex, want: "malformed digest"},
		{ref: hex, want: "not digest-pinned"},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			err := ValidateImageRef(tc.ref)
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, "sha256:"+hex, DigestOf(tc.ref))
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		in, name, version string
		bad               bool
	}{
		{in: "imap-fetcher:1.2", name: "imap-fetcher", version: "1.2"},
		{in: "echo", name: "echo"},
		{in: "echo:1.0.0-rc.1+build", name: "echo", version: "1.0.0-rc.1+build"},
		{in: "Echo:1", bad: true},
		{in: ":1", bad: true},
		{in: "echo:1 0", bad: true},
		{in: "-echo:1", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			n, v, err := ParseRef(tc.in)
			if tc.bad {
				require.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.name, n)
			require.Equal(t, tc.version, v)
		})
	}
}

func TestUpdateErrorShowsRootCause(t *testing.T) {
	root := temporal.NewNonRetryableApplicationError(`/bin/tool --version printed "1.0", want "9.9"`, ErrTypeVersionMismatch, nil)
	wrapped := fmt.Errorf("probe x:9.9: %w", temporal.NewApplicationErrorWithCause("probe failed", "wrapError", root))
	err := &UpdateError{Op: "register x:9.9", Err: wrapped}
	require.Equal(t, `register x:9.9: /bin/tool --version printed "1.0", want "9.9"`, err.Error())
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "register x:1: plain", (&UpdateError{Op: "register x:1", Err: errors.New("plain")}).Error())
}
