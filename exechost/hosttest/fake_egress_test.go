package hosttest_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/hosttest"
)

// recorder collects the events a policy's Events receives.
type recorder struct {
	mu     sync.Mutex
	events []exechost.EgressEvent
}

func (r *recorder) add(ev exechost.EgressEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) got() []exechost.EgressEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exechost.EgressEvent(nil), r.events...)
}

func egressRequest(events func(exechost.EgressEvent)) func(*exechost.ProvisionRequest) {
	return func(r *exechost.ProvisionRequest) {
		r.Network = exechost.NetworkEgress
		r.Egress = &exechost.EgressPolicy{
			Rules: []exechost.EgressRule{
				{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer tok"}},
				{Host: "*.cdn.example.com", Port: 443},
			},
			MaxBytes: 1 << 20,
			Events:   events,
		}
	}
}

// TestFakeEgressPolicy: the Fake serves a valid NetworkEgress request and
// remembers the policy it was given (a copy, Events left out), also after
// the sandbox ended; a network none sandbox has none.
func TestFakeEgressPolicy(t *testing.T) {
	f := newFake(t, hosttest.Options{})
	var rec recorder
	var req exechost.ProvisionRequest
	mutate := egressRequest(rec.add)
	id := provision(t, f, func(r *exechost.ProvisionRequest) { mutate(r); req = *r })

	want := &exechost.EgressPolicy{
		Rules: []exechost.EgressRule{
			{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer tok"}},
			{Host: "*.cdn.example.com", Port: 443},
		},
		MaxBytes: 1 << 20,
	}
	got := f.Egress(id)
	require.Equal(t, want, got)

	// Neither the caller's policy nor a returned copy is the Fake's own.
	req.Egress.Rules[0].Headers["Authorization"] = "changed"
	got.Rules[0].Host = "changed.example.com"
	require.Equal(t, want, f.Egress(id))

	require.NoError(t, f.Terminate(t.Context(), id))
	require.Equal(t, want, f.Egress(id), "readable after the sandbox ended")

	none := provision(t, f, func(r *exechost.ProvisionRequest) { r.ExecutionID = "none" })
	require.Nil(t, f.Egress(none))
	require.Nil(t, f.Egress("never-provisioned"))
	require.Empty(t, rec.got())
}

// TestFakeEmitEgress: events reach the policy's Events, from a test or
// from a Handler while the tool runs; none once the sandbox ended.
func TestFakeEmitEgress(t *testing.T) {
	var f *hosttest.Fake
	f = newFake(t, hosttest.Options{Handler: func(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
		if x.Argv[0] != "/bin/tool" {
			return hosttest.DefaultHandler(ctx, x)
		}
		err := f.EmitEgress(x.ExecutionID, exechost.EgressEvent{Host: "evil.example", Port: 80, Kind: "http", Reason: "not on the step's egress list"})
		if err != nil {
			return hosttest.Result{ExitCode: 1, Stderr: []byte(err.Error())}
		}
		return hosttest.Result{}
	}})
	var rec recorder
	id := provision(t, f, egressRequest(rec.add))

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	allowed := exechost.EgressEvent{Time: at, Host: "api.example.com", Port: 443, Kind: "mitm", Allowed: true,
		Reason: "egress rule api.example.com:443", Address: "10.1.2.3:443", BytesOut: 10, BytesIn: 20, Duration: time.Millisecond}
	require.NoError(t, f.EmitEgress(id, allowed))
	res, err := f.Exec(t.Context(), id, exechost.ExecRequest{Command: []string{"/bin/tool"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))

	got := rec.got()
	require.Len(t, got, 2)
	require.Equal(t, allowed, got[0])
	require.Equal(t, "evil.example", got[1].Host)
	require.False(t, got[1].Allowed)
	require.False(t, got[1].Time.IsZero(), "a zero Time is set")

	require.NoError(t, f.Terminate(t.Context(), id))
	require.ErrorIs(t, f.EmitEgress(id, allowed), exechost.ErrTerminated)
	require.Len(t, rec.got(), 2, "nothing after Terminate returned")

	require.ErrorIs(t, f.EmitEgress("unknown", allowed), exechost.ErrNotFound)
	none := provision(t, f, func(r *exechost.ProvisionRequest) { r.ExecutionID = "none" })
	require.ErrorContains(t, f.EmitEgress(none, allowed), "network none")

	// A policy without Events: the event goes nowhere.
	quiet := provision(t, f, func(r *exechost.ProvisionRequest) {
		egressRequest(nil)(r)
		r.ExecutionID = "quiet"
	})
	require.NoError(t, f.EmitEgress(quiet, allowed))
}

// TestFakeNoEgressEventAfterTerminate: events emitted while Terminate
// runs are delivered before it returns or not at all.
func TestFakeNoEgressEventAfterTerminate(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newFake(t, hosttest.Options{})
	var terminated, late atomic.Bool
	var delivered atomic.Int64
	id := provision(t, f, egressRequest(func(exechost.EgressEvent) {
		if terminated.Load() {
			late.Store(true)
		}
		delivered.Add(1)
	}))

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				if err := f.EmitEgress(id, exechost.EgressEvent{Host: "api.example.com", Port: 443, Kind: "connect", Allowed: true}); err != nil {
					return // the sandbox ended
				}
			}
		})
	}
	for delivered.Load() < 100 {
		runtime.Gosched()
	}
	require.NoError(t, f.Terminate(t.Context(), id))
	terminated.Store(true)
	wg.Wait()
	require.False(t, late.Load(), "an event was delivered after Terminate returned")
}

// TestFakeEgressEndsWithTheSandbox: a sandbox destroyed by a kill takes
// no more events either.
func TestFakeEgressEndsWithTheSandbox(t *testing.T) {
	f := newFake(t, hosttest.Options{})
	var rec recorder
	id := provision(t, f, egressRequest(rec.add))
	f.Kill(id)
	require.ErrorIs(t, f.EmitEgress(id, exechost.EgressEvent{Host: "api.example.com", Port: 443}), exechost.ErrTerminated)
	require.Empty(t, rec.got())
}
