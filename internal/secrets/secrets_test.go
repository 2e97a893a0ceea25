package secrets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSourcesResolve(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("  s3cr3t\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o600))
	vault := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(vault, "prod", "slack"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(vault, "prod", "slack", "webhook"), []byte("https://hooks.example/x\n"), 0o600))

	env := map[string]string{"API_KEY": "from-env", "EMPTY": ""}
	s := &Sources{
		LookupEnv:    func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Vault:        DirVault{Dir: vault},
		MaxFileBytes: 50,
	}

	tests := []struct {
		name    string
		source  string
		want    string
		wantErr error
	}{
		{name: "env", source: "env://API_KEY", want: "from-env"},
		{name: "env empty is a value", source: "env://EMPTY", want: ""},
		{name: "env missing", source: "env://NOPE", wantErr: ErrNotFound},
		{name: "file trimmed", source: "file://" + filepath.Join(dir, "token"), want: "s3cr3t"},
		{name: "file missing", source: "file://" + filepath.Join(dir, "nope"), wantErr: ErrNotFound},
		{name: "file relative", source: "file://relative/path", wantErr: ErrInvalidSource},
		{name: "file too big", source: "file://" + filepath.Join(dir, "big"), wantErr: ErrInvalidSource},
		{name: "vault", source: "vault://prod/slack/webhook", want: "https://hooks.example/x"},
		{name: "vault missing key", source: "vault://prod/slack/other", wantErr: ErrNotFound},
		{name: "vault no key", source: "vault://webhook", wantErr: ErrInvalidSource},
		{name: "vault escape", source: "vault://../../etc/passwd", wantErr: ErrInvalidSource},
		{name: "unknown scheme", source: "http://x/y", wantErr: ErrUnsupported},
		{name: "no scheme", source: "API_KEY", wantErr: ErrInvalidSource},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Resolve(t.Context(), tc.source)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestVaultUnconfigured(t *testing.T) {
	_, err := (&Sources{}).Resolve(t.Context(), "vault://prod/slack/webhook")
	require.ErrorIs(t, err, ErrUnsupported)
}

func TestResolveNamesSecretNotValue(t *testing.T) {
	env := map[string]string{"A": "value-a"}
	s := &Sources{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}

	got, err := Resolve(t.Context(), s, map[string]string{"a": "env://A"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "value-a"}, got)

	_, err = Resolve(t.Context(), s, map[string]string{"a": "env://A", "b": "env://B"})
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "b", se.Name)
	require.ErrorIs(t, err, ErrNotFound)
	require.NotContains(t, err.Error(), "value-a")
}
