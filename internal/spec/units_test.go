package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "1048576", want: 1 << 20},
		{in: "512Mi", want: 512 << 20},
		{in: "4Gi", want: 4 << 30},
		{in: "1.5Gi", want: 3 << 29},
		{in: "1G", want: 1e9},
		{in: "100KB", want: 100e3},
		{in: "2KiB", want: 2048},
		{in: "0.5", want: 1}, // rounded up to a whole byte
		{in: "512m", wantErr: "ambiguous"},
		{in: "1g", wantErr: "ambiguous"},
		{in: "12 parsecs", wantErr: "unknown unit"},
		{in: "", wantErr: "want a number"},
		{in: "-1Gi", wantErr: "want a number"},
		{in: "99999999Pi", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseCPU(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "1.5", want: 1_500_000_000},
		{in: "2", want: 2_000_000_000},
		{in: "2.0", want: 2_000_000_000},
		{in: "500m", want: 500_000_000},
		{in: "0.000000001", want: 1},
		{in: "0.0000000001", wantErr: true},
		{in: "1.5cores", wantErr: true},
		{in: "", wantErr: true},
		{in: "m", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCPU(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseGPU(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "1": 1, "4": 4, "all": -1} {
		got, err := ParseGPU(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseGPU("0.5")
	require.ErrorContains(t, err, "fractional gpu")
	_, err = ParseGPU("-1")
	require.Error(t, err)
	_, err = ParseGPU("many")
	require.Error(t, err)
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "2d", want: 48 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "-1d", want: -24 * time.Hour},
		{in: "500ms", want: 500 * time.Millisecond},
		{in: "3x", wantErr: true},
		{in: "10", wantErr: true},
		{in: "d", wantErr: true},
		{in: "1dd", wantErr: true},
		{in: "", wantErr: true},
		{in: "99999999999d", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestLooksSecret(t *testing.T) {
	for _, n := range []string{"API_TOKEN", "token", "Secret", "DB_PASSWORD", "passwd", "API_KEY", "apiKey", "api-key", "AWS_CREDENTIALS", "PRIVATE_KEY", "ssh_private_key", "GPG_PASSPHRASE", "ACCESS_KEY_ID"} {
		require.True(t, LooksSecret(n), n)
	}
	for _, n := range []string{"LOG_LEVEL", "HOME", "PATH", "KEYBOARD", "PWD", "TOKENIZER_PATH"[:0] + "MODEL"} {
		require.False(t, LooksSecret(n), n)
	}
}
