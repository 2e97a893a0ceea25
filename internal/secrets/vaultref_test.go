package secrets

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVaultRef(t *testing.T) {
	tests := []struct {
		source string
		mount  string
		want   VaultRef
	}{
		{"vault://prod/slack/webhook", "", VaultRef{Mount: "secret", Path: "prod/slack", Key: "webhook"}},
		{"vault://prod/slack/webhook", "kv", VaultRef{Mount: "kv", Path: "prod/slack", Key: "webhook"}},
		{"vault://secret/data/prod/db/password", "", VaultRef{Mount: "secret", Path: "prod/db", Key: "password"}},
		{"vault://secret/data/prod/db/password", "kv", VaultRef{Mount: "secret", Path: "prod/db", Key: "password"}},
		{"vault://kv/data/x/key", "", VaultRef{Mount: "kv", Path: "x", Key: "key"}},
		{"vault://a/b", "", VaultRef{Mount: "secret", Path: "a", Key: "b"}},
		// "data" elsewhere than second is an ordinary segment.
		{"vault://data/x/key", "", VaultRef{Mount: "secret", Path: "data/x", Key: "key"}},
		{"vault://prod/x/data/key", "", VaultRef{Mount: "secret", Path: "prod/x/data", Key: "key"}},
		{"vault://secret/data/prod/data/key", "", VaultRef{Mount: "secret", Path: "prod/data", Key: "key"}},
	}
	for _, tc := range tests {
		t.Run(tc.source+" "+tc.mount, func(t *testing.T) {
			src, err := ParseSource(tc.source)
			require.NoError(t, err)
			require.Equal(t, tc.want, src.VaultRef(tc.mount))
		})
	}
	// Both forms of one secret are one ref.
	a, _ := ParseSource("vault://prod/slack/webhook")
	b, _ := ParseSource("vault://secret/data/prod/slack/webhook")
	require.Equal(t, a.VaultRef(""), b.VaultRef(""))
	require.Equal(t, "secret/data/prod/slack#webhook", a.VaultRef("").String())

	// The explicit form needs a path and a key.
	for _, bad := range []string{"vault://secret/data/key", "vault://prod/data/key", "vault://secret/data"} {
		_, err := ParseSource(bad)
		require.ErrorIs(t, err, ErrInvalidSource, bad)
	}
}

// recordingVault records what it was asked for and answers "v".
type recordingVault struct{ refs []VaultRef }

func (r *recordingVault) Read(_ context.Context, ref VaultRef) (string, error) {
	r.refs = append(r.refs, ref)
	return "v", nil
}

// TestVaultPolicyOnResolvedPath: the allow-list is checked on the mount and
// path a source points to, before the Vault is asked anything; traversal
// and encoded spellings never parse.
func TestVaultPolicyOnResolvedPath(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		mount    string
		source   string
		want     *VaultRef // nil: refused
		wantErr  error
	}{
		{"short under prefix", []string{"prod/slack"}, "", "vault://prod/slack/webhook", &VaultRef{"secret", "prod/slack", "webhook"}, nil},
		{"explicit under short prefix", []string{"prod/slack"}, "", "vault://secret/data/prod/slack/webhook", &VaultRef{"secret", "prod/slack", "webhook"}, nil},
		{"deeper", []string{"prod"}, "", "vault://prod/slack/x/key", &VaultRef{"secret", "prod/slack/x", "key"}, nil},
		{"short under explicit prefix", []string{"secret/data/prod"}, "", "vault://prod/db/password", &VaultRef{"secret", "prod/db", "password"}, nil},
		{"whole mount", []string{"kv/data"}, "", "vault://kv/data/any/where/key", &VaultRef{"kv", "any/where", "key"}, nil},
		{"custom kv mount", []string{"prod"}, "kv", "vault://prod/db/password", &VaultRef{"kv", "prod/db", "password"}, nil},
		{"whole segments only", []string{"prod/slack"}, "", "vault://prod/slackers/key", nil, ErrNotAllowed},
		// A prefix spelled like the mount name is a path in the default
		// mount, not the mount: vault://secret/data/admin/x is path admin.
		{"mount-named prefix is a path", []string{"secret"}, "", "vault://secret/data/admin/x", nil, ErrNotAllowed},
		{"explicit form into another mount", []string{"prod"}, "", "vault://kv/data/prod/x", nil, ErrNotAllowed},
		{"same path other mount", []string{"kv/data/prod"}, "", "vault://prod/x", nil, ErrNotAllowed},
		{"prefix in another mount than the worker's", []string{"prod"}, "kv", "vault://secret/data/prod/x", nil, ErrNotAllowed},
		{"dotdot", []string{"prod"}, "", "vault://prod/../admin/x", nil, ErrInvalidSource},
		{"dotdot after data", []string{"secret/data"}, "", "vault://secret/data/../../sys/x", nil, ErrInvalidSource},
		{"dot", []string{"prod"}, "", "vault://prod/./x/key", nil, ErrInvalidSource},
		{"encoded dotdot", []string{"prod"}, "", "vault://prod/%2e%2e/admin/x", nil, ErrInvalidSource},
		{"encoded slash", []string{"prod"}, "", "vault://prod/a%2fb/key", nil, ErrInvalidSource},
		{"double-encoded", []string{"prod"}, "", "vault://prod/%252e%252e/admin/x", nil, ErrInvalidSource},
		{"query", []string{"prod"}, "", "vault://prod/x/key?version=1", nil, ErrInvalidSource},
		{"fragment", []string{"prod"}, "", "vault://prod/x/key#y", nil, ErrInvalidSource},
		{"backslash", []string{"prod"}, "", `vault://prod/..\admin/x`, nil, ErrInvalidSource},
		{"empty segment", []string{"prod"}, "", "vault://prod//x/key", nil, ErrInvalidSource},
		{"leading slash", []string{"prod"}, "", "vault:///prod/x/key", nil, ErrInvalidSource},
		{"unicode dots", []string{"prod"}, "", "vault://prod/\u2024\u2024/admin/x", nil, ErrInvalidSource},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := &recordingVault{}
			s := &Sources{Policy: Policy{VaultPrefixes: tc.prefixes}, Vault: v, VaultMount: tc.mount}
			require.NoError(t, s.Policy.Check())
			got, err := s.Resolve(t.Context(), tc.source)
			if tc.want == nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Empty(t, got)
				require.Empty(t, v.refs, "the vault was asked before the policy refused")
				return
			}
			require.NoError(t, err)
			require.Equal(t, []VaultRef{*tc.want}, v.refs)
		})
	}
}

func TestDirVaultForms(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "prod", "db"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prod", "db", "password"), []byte("pw\n"), 0o600))
	s := &Sources{Policy: Policy{VaultPrefixes: []string{"prod", "kv/data"}}, Vault: DirVault{Dir: dir}}
	for _, src := range []string{"vault://prod/db/password", "vault://secret/data/prod/db/password"} {
		got, err := s.Resolve(t.Context(), src)
		require.NoError(t, err, src)
		require.Equal(t, "pw", got)
	}
	_, err := s.Resolve(t.Context(), "vault://kv/data/prod/db/password")
	require.ErrorIs(t, err, ErrNotFound, "the dev vault holds one mount")
}

func TestCheckVaultMount(t *testing.T) {
	for _, ok := range []string{"secret", "kv", "team-a_kv.2"} {
		require.NoError(t, CheckVaultMount(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "/secret", "sec%2fret", "sec ret"} {
		require.Error(t, CheckVaultMount(bad), bad)
	}
}
