package registry

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/failure"
)

// RegistryWorkflow is the long-lived registry. It never completes on its
// own: it serves updates and queries and continues-as-new (carrying the
// map) after st.MaxUpdates updates or when the server suggests it.
//
// Determinism: the map is only ever read through Sorted or direct key
// lookups; RegisteredAt comes from workflow.Now.
func RegistryWorkflow(ctx workflow.Context, st State) error {
	if st.Tools == nil {
		st.Tools = map[string]map[string]Tool{}
	}
	limit := st.MaxUpdates
	if limit <= 0 {
		limit = DefaultMaxUpdates
	}
	logger := workflow.GetLogger(ctx)
	handled := 0

	if err := workflow.SetQueryHandler(ctx, QueryTools, func() ([]Tool, error) {
		return Sorted(st.Tools), nil
	}); err != nil {
		return fmt.Errorf("set %s query: %w", QueryTools, err)
	}

	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRegister,
		func(ctx workflow.Context, req RegisterRequest) (Tool, error) {
			defer func() { handled++ }()
			if t, ok := lookup(st.Tools, req.Name, req.Version); ok {
				return sameOrConflict(t, req)
			}
			probe, err := runProbe(ctx, req)
			if err != nil {
				return Tool{}, err
			}
			// Another registration of the same name:version may have
			// finished while this one probed.
			if t, ok := lookup(st.Tools, req.Name, req.Version); ok {
				return sameOrConflict(t, req)
			}
			t := Tool{
				Name: req.Name, Version: req.Version, Image: req.Image,
				Digest: DigestOf(req.Image), Description: req.Description,
				Usage: probe.Usage, PinnedFrom: req.PinnedFrom,
				RegisteredAt: workflow.Now(ctx).UTC(),
			}
			if st.Tools[t.Name] == nil {
				st.Tools[t.Name] = map[string]Tool{}
			}
			st.Tools[t.Name][t.Version] = t
			logger.Info("tool registered", "tool", t.Ref(), "image", t.Image)
			return t, nil
		},
		workflow.UpdateHandlerOptions{
			// Malformed requests and obvious conflicts are refused before they
			// are written to history.
			Validator: func(_ workflow.Context, req RegisterRequest) error {
				if err := req.Validate(); err != nil {
					return err
				}
				if t, ok := lookup(st.Tools, req.Name, req.Version); ok {
					_, err := sameOrConflict(t, req)
					return err
				}
				return nil
			},
		})
	if err != nil {
		return fmt.Errorf("set %s update: %w", UpdateRegister, err)
	}

	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateRemove,
		func(_ workflow.Context, req RemoveRequest) ([]Tool, error) {
			defer func() { handled++ }()
			removed, err := remove(st.Tools, req)
			if err == nil {
				logger.Info("tool removed", "tool", req.Name, "version", req.Version, "count", len(removed))
			}
			return removed, err
		},
		workflow.UpdateHandlerOptions{
			Validator: func(_ workflow.Context, req RemoveRequest) error {
				return checkRemove(st.Tools, req)
			},
		})
	if err != nil {
		return fmt.Errorf("set %s update: %w", UpdateRemove, err)
	}

	// Wait until enough updates were handled (or the server asks), then let
	// in-flight handlers finish so no accepted update is lost.
	if err := workflow.Await(ctx, func() bool {
		return handled >= limit || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	logger.Info("registry continues as new", "updates", handled, "tools", len(Sorted(st.Tools)))
	return workflow.NewContinueAsNewError(ctx, WorkflowName, State{Tools: st.Tools, MaxUpdates: st.MaxUpdates})
}

func lookup(m map[string]map[string]Tool, name, version string) (Tool, bool) {
	t, ok := m[name][version]
	return t, ok
}

// sameOrConflict makes registration idempotent: the same name:version with
// the same digest returns the stored tool; another digest is refused, since
// runs pinned to name:version must keep meaning one image.
func sameOrConflict(t Tool, req RegisterRequest) (Tool, error) {
	if t.Digest == DigestOf(req.Image) {
		return t, nil
	}
	return Tool{}, failure.New(ErrTypeConflict,
		fmt.Sprintf("tool %s is already registered with image %s; register a new version instead", t.Ref(), t.Image))
}

func checkRemove(m map[string]map[string]Tool, req RemoveRequest) error {
	if err := ValidateName(req.Name); err != nil {
		return err
	}
	if _, ok := m[req.Name]; !ok {
		return failure.New(ErrTypeNotFound, fmt.Sprintf("tool %s is not registered", req.Name))
	}
	if req.Version != "" {
		if _, ok := m[req.Name][req.Version]; !ok {
			return failure.New(ErrTypeNotFound, fmt.Sprintf("tool %s:%s is not registered", req.Name, req.Version))
		}
	}
	return nil
}

func remove(m map[string]map[string]Tool, req RemoveRequest) ([]Tool, error) {
	if err := checkRemove(m, req); err != nil {
		return nil, err
	}
	if req.Version == "" {
		removed := Sorted(map[string]map[string]Tool{req.Name: m[req.Name]})
		delete(m, req.Name)
		return removed, nil
	}
	t := m[req.Name][req.Version]
	delete(m[req.Name], req.Version)
	if len(m[req.Name]) == 0 {
		delete(m, req.Name)
	}
	return []Tool{t}, nil
}

// probeTimeout bounds one probe attempt: provision, two short execs,
// terminate.
const probeTimeout = 2 * time.Minute

func runProbe(ctx workflow.Context, req RegisterRequest) (*ProbeResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: probeTimeout,
		Summary:             "probe " + req.Name + ":" + req.Version,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: failure.NonRetryableProbeTypes(),
		},
	})
	var res ProbeResult
	var p *Prober
	err := workflow.ExecuteActivity(ctx, p.ProbeTool, ProbeRequest{Name: req.Name, Version: req.Version, Image: req.Image}).Get(ctx, &res)
	if err != nil {
		return nil, fmt.Errorf("probe %s:%s (%s): %w", req.Name, req.Version, req.Image, err)
	}
	return &res, nil
}
