package exechost

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLooksSecretNormalisation(t *testing.T) {
	// One normalisation: upper-case, every non-alphanumeric dropped.
	for _, n := range []string{"API_TOKEN", "api-token", "Api.Token", "apiToken", "A_P_I_K_E_Y", "x-api-key", "PRIVATE_KEY", "passwd", "AWS_ACCESS_KEY_ID"} {
		require.True(t, LooksSecret(n), n)
	}
	for _, n := range []string{"LOG_LEVEL", "HOME", "PATH", "MODEL", "KEYBOARD", "PWD", ""} {
		require.False(t, LooksSecret(n), n)
	}
}

func TestChoosesCode(t *testing.T) {
	for _, n := range []string{"LD_PRELOAD", "ld_library_path", "LD_AUDIT", "LD_BIND_NOW", "DYLD_INSERT_LIBRARIES", "PATH", "Path",
		"BASH_ENV", "ENV", "PS4", "PROMPT_COMMAND", "IFS", "BASH_FUNC_ls%%", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS",
		"PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "GIT_SSH_COMMAND", "GIT_DIR", "GCONV_PATH", "CLASSPATH"} {
		require.True(t, ChoosesCode(n), n)
	}
	for _, n := range []string{"LOG_LEVEL", "LDAP_URL", "PATHS", "MY_PATH", "ENVIRONMENT", "NODE_ENV", "GITHUB_REPO", "PYTHONUNBUFFERED", "HOME"} {
		require.False(t, ChoosesCode(n), n)
	}
}

func TestChoosesDevices(t *testing.T) {
	for _, n := range []string{"NVIDIA_VISIBLE_DEVICES", "nvidia_visible_devices", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_CONFIG_DEVICES",
		"NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE", "AMD_VISIBLE_DEVICES"} {
		require.True(t, ChoosesDevices(n), n)
		require.ErrorContains(t, CheckEnvName(n, false), "host devices", n)
		require.ErrorContains(t, CheckEnvName(n, true), "host devices", "as a secret too: %s", n)
	}
	for _, n := range []string{"CUDA_VISIBLE_DEVICES", "AGENTFLOW_GPU_DEVICES", "NVIDIA", "MY_NVIDIA_MODEL", "AMD_DEVICE"} {
		require.False(t, ChoosesDevices(n), n)
		require.NoError(t, CheckEnvName(n, false), n)
	}
}

func TestCheckPinnedImage(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	tests := []struct {
		ref, want string // want "" = accepted
		unpinned  bool
	}{
		{ref: "sha256:" + hex},
		{ref: "busybox@sha256:" + hex},
		{ref: "localhost:5000/a/b-c.d@sha256:" + hex},
		{ref: "127.0.0.1:5000/agentflow/testtool@sha256:" + hex}, // loopback test registry
		{ref: "127.0.0.1:5000/agentflow/testtool:1.0@sha256:" + hex, want: "drop the tag: 127.0.0.1:5000/agentflow/testtool@sha256:"},
		{ref: "alpine:3.19@sha256:" + hex, want: `drop the tag: alpine@sha256:` + hex},
		{ref: "localhost:5000/a:v1@sha256:" + hex, want: `the daemon ignores the tag "v1"`},
		{ref: "alpine:3.19", want: "not digest-pinned", unpinned: true},
		{ref: "", want: "not digest-pinned", unpinned: true},
		{ref: "sha256:" + hex[:10], want: "malformed digest"},
		{ref: "a@sha256:" + strings.ToUpper(hex), want: "malformed digest"},
		{ref: "A@sha256:" + hex, want: "not lowercase path components"},
		{ref: "a//b@sha256:" + hex, want: "not lowercase path components"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			err := CheckPinnedImage(tt.ref)
			if tt.want == "" {
				require.NoError(t, err)
				require.True(t, IsPinned(tt.ref))
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, tt.unpinned, errIsUnpinned(err))
			require.False(t, IsPinned(tt.ref))
		})
	}
	// A host that allows tags still refuses what is not a reference, and
	// never a malformed digest.
	require.NoError(t, CheckImageRef("alpine:3.19", true))
	require.Error(t, CheckImageRef("--privileged", true))
	require.Error(t, CheckImageRef("a b", true))
	require.Error(t, CheckImageRef("alpine:3.19@sha256:"+hex, true))
	require.Error(t, CheckImageRef("alpine:3.19", false))
}

func errIsUnpinned(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrUnpinnedImage.Error())
}

func TestCheckEnvValue(t *testing.T) {
	refused := map[string]string{
		"AKIAIOSFODNN7EXAMPLE":                      "AWS access key ID",
		"prefix ASIAY34FZKBOKMUTVV7A suffix":        "AWS access key ID",
		"ghp_" + strings.Repeat("x", 36):            "GitHub token",
		"github_pat_" + strings.Repeat("y", 30):     "GitHub token",
		"glpat-" + strings.Repeat("z", 20):          "GitLab token",
		"xoxp-1234567890-abc":                       "Slack token",
		"-----BEGIN EC PRIVATE KEY-----\nMHc...":    "private key",
		"-----BEGIN PRIVATE KEY-----":               "private key",
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.": "JSON Web Token",
		"key=AIza" + strings.Repeat("A", 35):        "Google API key",
		"sk_live_" + strings.Repeat("4", 24):        "Stripe key",
	}
	for v, kind := range refused {
		err := CheckEnvValue(v)
		require.ErrorContains(t, err, kind, v)
		require.NotContains(t, err.Error(), v)
	}
	for _, v := range []string{"", "debug", "https://example.com/a?b=c", "XAKIAIOSFODNN7EXAMPLE", "ghp_", "eyJhbGciOiJub25lIn0", "-----BEGIN CERTIFICATE-----"} {
		require.NoError(t, CheckEnvValue(v), v)
	}
	require.ErrorContains(t, CheckEnvValue("a\x00b"), "NUL")
}

func TestValidatorSecretsField(t *testing.T) {
	var v Validator
	// A secret's name may look secret and its value may be a credential;
	// a name that chooses code is refused there too.
	require.NoError(t, v.ValidateExec(ExecRequest{Command: []string{"x"}, Secrets: map[string]string{"GITHUB_TOKEN": "ghp_" + strings.Repeat("x", 36)}}))
	err := v.ValidateExec(ExecRequest{Command: []string{"x"}, Secrets: map[string]string{"LD_PRELOAD": "/x.so"}})
	require.ErrorIs(t, err, ErrPolicy)
	var pe *PolicyError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "secrets.LD_PRELOAD", pe.Field)
}
