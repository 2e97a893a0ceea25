package policy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/internal/spec"
)

// The spec validator and the Docker policy must accept and refuse the same
// env names, env values and image references: a spec that validates must
// not be refused by the sandbox later, and the sandbox must not accept what
// the spec refuses (a host is also called by code that never read a spec).

const agreeImageID = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// specAccepts loads a one-step spec built from step (YAML flow mapping
// fields) and reports whether it validates.
func specAccepts(t *testing.T, step string) (bool, error) {
	t.Helper()
	src := "name: agree\nversion: \"1.0.0\"\nsteps:\n  - {id: a, " + step + "}\n"
	plan, err := spec.Load("agree.yaml", []byte(src))
	return plan != nil && err == nil, err
}

func policyRequest() exechost.ProvisionRequest {
	return exechost.ProvisionRequest{
		ExecutionID: "agree-1",
		Image:       agreeImageID,
		Resources: exechost.ResourceLimits{NanoCPUs: 1e9, MemoryBytes: 256 << 20, DiskBytes: 64 << 20, Pids: 64,
			Runtime: time.Minute, MaxOutputBytes: 1 << 20},
		Network: exechost.NetworkNone,
	}
}

func newDockerPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.New(policy.Config{})
	require.NoError(t, err)
	return p
}

func TestSpecAndPolicyAgreeOnEnvNames(t *testing.T) {
	tests := []struct {
		name   string
		refuse bool // what both must answer
	}{
		// Secret-looking, both historical normalisations and case variants.
		{"API_TOKEN", true}, {"api_token", true}, {"ApiToken", true}, {"apiToken", true},
		{"API_KEY", true}, {"APIKEY", true}, {"apiKey", true}, {"Api_Key", true},
		{"api-key", true},   // '-' is not an env name character: refused as syntax
		{"API-TOKEN", true}, // likewise
		{"DB_PASSWORD", true}, {"db_passwd", true}, {"GPG_PASSPHRASE", true},
		{"AWS_SECRET_ACCESS_KEY", true}, {"ACCESS_KEY_ID", true}, {"GCP_CREDENTIALS", true},
		{"SSH_PRIVATE_KEY", true}, {"private_key", true}, {"X_SECRET", true}, {"S_E_C_R_E_T", true},
		{"GITHUB_TOKEN", true}, {"OPENAI_API_KEY", true},
		// Names that choose which code runs.
		{"LD_PRELOAD", true}, {"LD_LIBRARY_PATH", true}, {"LD_AUDIT", true}, {"ld_preload", true},
		{"PATH", true}, {"path", true}, {"BASH_ENV", true}, {"ENV", true}, {"PS4", true}, {"IFS", true},
		{"PYTHONPATH", true}, {"PYTHONSTARTUP", true}, {"NODE_OPTIONS", true}, {"PERL5OPT", true},
		{"RUBYOPT", true}, {"JAVA_TOOL_OPTIONS", true}, {"GIT_SSH_COMMAND", true}, {"GIT_CONFIG_GLOBAL", true},
		{"BASH_FUNC_x%%", true}, {"GCONV_PATH", true},
		// Names that choose which host devices a GPU runtime attaches.
		{"NVIDIA_VISIBLE_DEVICES", true}, {"nvidia_driver_capabilities", true}, {"NVIDIA_MIG_CONFIG_DEVICES", true},
		{"AMD_VISIBLE_DEVICES", true}, {"CUDA_VISIBLE_DEVICES", false},
		// Syntax.
		{"1BAD", true}, {"A=B", true}, {"A B", true}, {"", true}, {"Ä", true},
		// Harmless.
		{"LOG_LEVEL", false}, {"HOME", false}, {"MODEL", false}, {"KEYBOARD", false}, {"PWD", false},
		{"log_level", false}, {"_PRIVATE", false}, {"X1", false}, {"TOKENIZE", true}, // TOKEN inside a word still counts
		{"PATHS", false}, {"MY_PATH", false}, {"LDAP_HOST", false}, {"GITHUB_REPO", false}, {"NODE_ENV", false},
		{"PYTHONUNBUFFERED", false}, {"ENVIRONMENT", false},
	}
	require.GreaterOrEqual(t, len(tests), 30)
	p := newDockerPolicy(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specOK, specErr := specAccepts(t, fmt.Sprintf("image: %q, env: {%s: plain}", agreeImageID, strconv.Quote(tt.name)))
			req := policyRequest()
			req.Env = map[string]string{tt.name: "plain"}
			provErr := p.ValidateProvision(req)
			execErr := p.ValidateExec(exechost.ExecRequest{Command: []string{"/bin/tool"}, Env: map[string]string{tt.name: "plain"}})
			require.Equal(t, tt.refuse, !specOK, "spec: %v", specErr)
			require.Equal(t, tt.refuse, provErr != nil, "provision: %v", provErr)
			require.Equal(t, tt.refuse, execErr != nil, "exec: %v", execErr)
			if tt.refuse {
				require.ErrorIs(t, provErr, exechost.ErrPolicy)
			}
		})
	}
}

func TestSpecAndPolicyAgreeOnEnvValues(t *testing.T) {
	tests := []struct {
		name, value string
		refuse      bool
	}{
		{"aws key id", "AKIAIOSFODNN7EXAMPLE", true},
		{"aws session key id", "id=ASIAY34FZKBOKMUTVV7A;", true},
		{"github classic", "ghp_" + strings.Repeat("a1B2", 9), true},
		{"github app", "ghs_" + strings.Repeat("Z9y8", 9), true},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", true},
		{"gitlab", "glpat-" + strings.Repeat("x", 20), true},
		{"slack bot", "xoxb-123456789012-abcdefABCDEF", true},
		{"pem header", "-----BEGIN RSA PRIVATE KEY-----", true},
		{"openssh key", "-----BEGIN OPENSSH PRIVATE KEY-----", true},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl", true},
		{"google api key", "AIza" + strings.Repeat("Sy", 17) + "x", true},
		{"plain word", "debug", false},
		{"url", "https://example.com/feed.xml", false},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", false},
		{"akia lookalike too short", "AKIA1234", false},
		{"public key header", "-----BEGIN PUBLIC KEY-----", false},
		{"ghp without body", "ghp_short", false},
	}
	p := newDockerPolicy(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specOK, specErr := specAccepts(t, fmt.Sprintf("image: %q, env: {CONFIG: %s}", agreeImageID, strconv.Quote(tt.value)))
			req := policyRequest()
			req.Env = map[string]string{"CONFIG": tt.value}
			provErr := p.ValidateProvision(req)
			require.Equal(t, tt.refuse, !specOK, "spec: %v", specErr)
			require.Equal(t, tt.refuse, provErr != nil, "provision: %v", provErr)
			if tt.refuse {
				require.NotContains(t, provErr.Error(), tt.value, "the refusal must not quote the value")
				require.Contains(t, specErr.Error(), "declare it under secrets")
			}
			// A secret may hold a credential: that is what secrets are for.
			exec := exechost.ExecRequest{Command: []string{"/bin/tool"}, Secrets: map[string]string{"CONFIG": tt.value}}
			require.NoError(t, p.ValidateExec(exec))
		})
	}
}

func TestSpecAndPolicyAgreeOnImages(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		ref    string
		refuse bool
	}{
		{"sha256:" + hex, false},
		{"agentflow/tool-echo@sha256:" + hex, false},
		{"echo@sha256:" + hex, false},
		{"registry.local:5000/team/echo@sha256:" + hex, false},
		{"127.0.0.1:5000/agentflow/testtool@sha256:" + hex, false}, // the loopback registry of the pull tests
		{"127.0.0.1:5000/agentflow/testtool:1.0@sha256:" + hex, true},
		{"ghcr.io/org/sub/tool@sha256:" + hex, false},
		{"alpine:3.19@sha256:" + hex, true}, // tag plus digest
		{"registry.local:5000/team/echo:1.0@sha256:" + hex, true},
		{"alpine:3.19", true},
		{"alpine", true},
		{"alpine:latest", true},
		{"sha256:" + hex[:63], true},
		{"sha256:" + strings.ToUpper(hex), true},
		{"Echo@sha256:" + hex, true},
		{"echo@sha256:xyz", true},
		{"echo@sha512:" + hex + hex, true},
		{hex, true},
		{"--privileged@sha256:" + hex, true},
		{"echo@@sha256:" + hex, true},
		{"echo @sha256:" + hex, true},
	}
	p := newDockerPolicy(t)
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			specOK, specErr := specAccepts(t, fmt.Sprintf("image: %q", tt.ref))
			req := policyRequest()
			req.Image = tt.ref
			provErr := p.ValidateProvision(req)
			require.Equal(t, tt.refuse, !specOK, "spec: %v", specErr)
			require.Equal(t, tt.refuse, provErr != nil, "provision: %v", provErr)
			if strings.Contains(tt.ref, ":3.19@") {
				require.ErrorContains(t, specErr, "drop the tag")
				require.ErrorContains(t, provErr, "drop the tag")
			}
		})
	}
}
