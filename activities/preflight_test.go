package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/spec"
)

// fakeImageChecker knows the images in have; every other one is missing.
type fakeImageChecker struct{ have map[string]bool }

func (f fakeImageChecker) CheckImage(_ context.Context, ref string) (string, error) {
	if f.have[ref] {
		return "present", nil
	}
	return "", fmt.Errorf("image %s is not on worker w1 and its registry does not have it", ref)
}

// fakeLookup resolves the names in addrs; every other one does not exist.
type fakeLookup struct {
	mu    sync.Mutex
	addrs map[string]string
	asked []string
}

func (f *fakeLookup) LookupHost(_ context.Context, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	f.asked = append(f.asked, host)
	f.mu.Unlock()
	if a, ok := f.addrs[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, fmt.Errorf("%s does not resolve on this worker (no such host)", host)
}

// countingResolver counts resolutions per source around another resolver;
// leak makes every failure quote the value of AF_PF_OK (a misbehaving
// resolver the report must still scrub).
type countingResolver struct {
	r    secrets.Resolver
	mu   sync.Mutex
	n    map[string]int
	leak string
}

func (c *countingResolver) Resolve(ctx context.Context, source string) (string, error) {
	c.mu.Lock()
	c.n[source]++
	c.mu.Unlock()
	v, err := c.r.Resolve(ctx, source)
	if err != nil && c.leak != "" {
		return "", fmt.Errorf("%w (while %s was known)", err, c.leak)
	}
	return v, err
}

const pfSecretValue = "pf-S3cret-V4lue-never-in-a-report"

func TestPreflight(t *testing.T) {
	t.Setenv("AF_PF_OK", pfSecretValue)
	t.Setenv("AF_PF_REFUSED", "refused-"+pfSecretValue)
	const (
		present = "reg.local/echo@sha256:1111111111111111111111111111111111111111111111111111111111111111"
		missing = "agentflow/echo@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	)
	type line struct{ kind, step, target, status, reason string }
	tests := []struct {
		name      string
		steps     []PreflightStep
		images    ImageChecker
		hosts     *fakeLookup
		gpu       bool
		gpuPolicy GPUPolicy
		leak      bool
		want      []line
		// resolved: source → how often it was resolved.
		resolved map[string]int
	}{
		{name: "images present, missing, unresolved", images: fakeImageChecker{have: map[string]bool{present: true}},
			steps: []PreflightStep{{ID: "a", Image: present}, {ID: "b", Image: missing}, {ID: "c"}},
			want: []line{
				{"image", "a", present, CheckOK, "present"},
				{"image", "b", missing, CheckFail, "image " + missing + " is not on worker w1"},
				{"image", "c", "", CheckFail, "unresolved tool"},
			}},
		{name: "host without an image checker", steps: []PreflightStep{{ID: "a", Image: present}},
			want: []line{{"image", "a", present, CheckSkip, "cannot check images"}}},
		{name: "secrets: allowed, refused, unset, once per source",
			steps: []PreflightStep{
				{ID: "a", Image: present, SecretSources: map[string]string{"tok": "env://AF_PF_OK", "bad": "env://AF_PF_REFUSED"}},
				{ID: "b", Image: present, SecretSources: map[string]string{"tok": "env://AF_PF_OK", "gone": "env://AF_PF_UNSET"}},
			},
			images: fakeImageChecker{have: map[string]bool{present: true}},
			want: []line{
				{"image", "a", present, CheckOK, ""},
				{"secret", "a", "bad (env)", CheckFail, "refused by this worker's secret policy"},
				{"secret", "a", "tok (env)", CheckOK, "resolves on this worker"},
				{"image", "b", present, CheckOK, ""},
				{"secret", "b", "gone (env)", CheckFail, "AF_PF_UNSET is not set on the worker"},
				{"secret", "b", "tok (env)", CheckOK, ""},
			},
			resolved: map[string]int{"env://AF_PF_OK": 1, "env://AF_PF_REFUSED": 1, "env://AF_PF_UNSET": 1}},
		{name: "a resolver error quoting a value is scrubbed", leak: true,
			steps: []PreflightStep{{ID: "a", Image: present, SecretSources: map[string]string{"tok": "env://AF_PF_OK", "gone": "env://AF_PF_UNSET"}}},
			want: []line{
				{"image", "a", present, CheckSkip, ""},
				{"secret", "a", "gone (env)", CheckFail, "(while *** was known)"},
				{"secret", "a", "tok (env)", CheckOK, ""},
			}},
		{name: "gpu steps are checked by the CLI, on the GPU queue", gpuPolicy: GPUPolicyRequire,
			steps: []PreflightStep{{ID: "train", Image: present, GPUs: 1}},
			want: []line{
				{"image", "train", present, CheckSkip, ""},
			}},
		{name: "egress hosts", hosts: &fakeLookup{addrs: map[string]string{"api.example.com": "203.0.113.7"}},
			steps: []PreflightStep{{ID: "fetch", Image: present, Egress: []spec.EgressRule{
				{Host: "api.example.com", Port: 443}, {Host: "nope.invalid", Port: 443}, {Host: "*.example.org", Port: 443},
			}}},
			want: []line{
				{"image", "fetch", present, CheckSkip, ""},
				{"egress", "fetch", "api.example.com:443", CheckOK, "resolves to 203.0.113.7"},
				{"egress", "fetch", "nope.invalid:443", CheckFail, "does not resolve on this worker"},
				{"egress", "fetch", "*.example.org:443", CheckOK, "wildcard"},
			}},
		{name: "worker without a host lookup", steps: []PreflightStep{{ID: "fetch", Image: present, Egress: []spec.EgressRule{{Host: "api.example.com", Port: 443}}}},
			want: []line{
				{"image", "fetch", present, CheckSkip, ""},
				{"egress", "fetch", "api.example.com:443", CheckSkip, "cannot check egress hosts"},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := &countingResolver{
				r: &secrets.Sources{Policy: secrets.Policy{EnvAllow: []string{"AF_PF_OK", "AF_PF_UNSET"}}},
				n: map[string]int{},
				leak: func() string {
					if tc.leak {
						return pfSecretValue
					}
					return ""
				}(),
			}
			opts := Options{Host: newFakeHost(), Identity: "w1", Secrets: res, Images: tc.images,
				GPUAvailable: tc.gpu, GPUPolicy: tc.gpuPolicy}
			if tc.hosts != nil {
				opts.Hosts = tc.hosts
			}
			rep, err := New(opts).Preflight(t.Context(), PreflightRequest{Steps: tc.steps})
			require.NoError(t, err)
			require.Equal(t, "w1", rep.Worker)
			require.Len(t, rep.Checks, len(tc.want))
			failed := 0
			for i, w := range tc.want {
				c := rep.Checks[i]
				require.Equal(t, w.kind, c.Kind, "check %d", i)
				require.Equal(t, w.step, c.Step, "check %d", i)
				require.Equal(t, w.target, c.Target, "check %d", i)
				require.Equal(t, w.status, c.Status, "check %d: %s", i, c.Reason)
				require.Contains(t, c.Reason, w.reason, "check %d", i)
				if w.status == CheckFail {
					failed++
				}
			}
			require.Equal(t, failed, rep.Failed())
			b, err := json.Marshal(rep)
			require.NoError(t, err)
			require.NotContains(t, string(b), pfSecretValue, "no secret value in the report")
			for src, n := range tc.resolved {
				require.Equal(t, n, res.n[src], "resolutions of %s", src)
			}
			if tc.hosts != nil {
				for _, h := range tc.hosts.asked {
					require.False(t, strings.HasPrefix(h, "*."), "a wildcard is never looked up")
				}
			}
		})
	}
}

func TestPreflightCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := New(Options{Host: newFakeHost()}).Preflight(ctx, PreflightRequest{Steps: []PreflightStep{{ID: "a", Image: "x"}}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestPreflightRequestFor(t *testing.T) {
	plan := &spec.Plan{
		Secrets: []spec.SecretDecl{{Name: "tok", Source: "vault://prod/app/token"}, {Name: "unused", Source: "env://X"}},
		Steps: []spec.PlanStep{
			{ID: "fetch", Image: "img-a", Secrets: []string{"tok"}, Resources: spec.Resources{GPUs: 1},
				Egress: []spec.EgressRule{{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer {{ .secrets.tok }}"}}}},
			{ID: "review", Approval: &spec.Approval{Prompt: "ok?"}},
			{ID: "send", Image: "img-b"},
		},
	}
	got := PreflightRequestFor(plan)
	require.Equal(t, PreflightRequest{Steps: []PreflightStep{
		{ID: "fetch", Image: "img-a", SecretSources: map[string]string{"tok": "vault://prod/app/token"}, GPUs: 1,
			Egress: []spec.EgressRule{{Host: "api.example.com", Port: 443}}},
		{ID: "send", Image: "img-b"},
	}}, got)
}

func TestCheckBudget(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		left time.Duration // 0: no deadline
		want time.Duration
	}{
		{name: "no deadline", want: PreflightTimeout},
		{name: "far deadline", left: time.Minute, want: PreflightTimeout},
		{name: "30s default", left: 30 * time.Second, want: PreflightTimeout},
		{name: "5s: a fifth kept", left: 5 * time.Second, want: 4 * time.Second},
		{name: "2s: a second kept", left: 2 * time.Second, want: time.Second},
		{name: "nearly gone", left: 500 * time.Millisecond, want: 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.left > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.left))
				defer cancel()
			}
			require.Equal(t, tc.want, checkBudget(ctx, now))
		})
	}
}
