package registry

import (
	"context"
	"errors"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Client talks to the registry workflow. It starts the workflow on demand
// (first registration) with the USE_EXISTING conflict policy, so any number
// of clients can race to start it and all end up on the same execution.
type Client struct {
	Temporal  client.Client
	TaskQueue string // defaults to "agentflow"
}

// DefaultTaskQueue is where the registry workflow and its probe run; the
// same queue as AgentWorkflow, so one worker serves both.
const DefaultTaskQueue = "agentflow"

func (c *Client) taskQueue() string {
	if c.TaskQueue != "" {
		return c.TaskQueue
	}
	return DefaultTaskQueue
}

// ensureStarted starts the registry if it is not running.
func (c *Client) ensureStarted(ctx context.Context) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       WorkflowID,
		TaskQueue:                c.taskQueue(),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "agentflow tool registry",
	}, WorkflowName, State{})
	if err != nil {
		return fmt.Errorf("start tool registry: %w", err)
	}
	return nil
}

// Register validates req locally (errors match ErrInvalid), then registers
// it and waits for the probe. Probe and conflict errors come back as the
// update's failure.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (Tool, error) {
	if err := req.Validate(); err != nil {
		return Tool{}, err
	}
	if err := c.ensureStarted(ctx); err != nil {
		return Tool{}, err
	}
	var t Tool
	if err := c.update(ctx, UpdateRegister, req, &t); err != nil {
		return Tool{}, &UpdateError{Op: "register " + req.Name + ":" + req.Version, Err: err}
	}
	return t, nil
}

// Remove removes one version (or every version when req.Version is empty).
func (c *Client) Remove(ctx context.Context, req RemoveRequest) ([]Tool, error) {
	if err := ValidateName(req.Name); err != nil {
		return nil, err
	}
	var removed []Tool
	if err := c.update(ctx, UpdateRemove, req, &removed); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("remove %s: %w", req.Name, ErrNotRegistered)
		}
		return nil, fmt.Errorf("remove %s: %w", req.Name, err)
	}
	return removed, nil
}

func (c *Client) update(ctx context.Context, name string, arg, result any) error {
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   WorkflowID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, result)
}

// ErrNotRegistered: the registry has no such tool (or no registry exists).
var ErrNotRegistered = errors.New("tool not registered")

// List returns every registered tool in name, version order. No registry
// yet means no tools.
func (c *Client) List(ctx context.Context) ([]Tool, error) {
	v, err := c.Temporal.QueryWorkflow(ctx, WorkflowID, "", QueryTools)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("query tool registry: %w", err)
	}
	var tools []Tool
	if err := v.Get(&tools); err != nil {
		return nil, fmt.Errorf("decode tool registry: %w", err)
	}
	return tools, nil
}

// Resolve looks up every "name:version" in refs. Unknown refs are returned
// sorted in missing (not an error: callers list them all at once).
func (c *Client) Resolve(ctx context.Context, refs []string) (found map[string]Tool, missing []string, err error) {
	if len(refs) == 0 {
		return map[string]Tool{}, nil, nil
	}
	tools, err := c.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ResolveIn(tools, refs)
}

// ResolveIn is Resolve against an already fetched list.
func ResolveIn(tools []Tool, refs []string) (found map[string]Tool, missing []string, err error) {
	byRef := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byRef[t.Ref()] = t
	}
	found = map[string]Tool{}
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		if t, ok := byRef[r]; ok {
			found[r] = t
		} else {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	return found, missing, nil
}

// isNotFound reports a missing workflow or a NotFound application error
// from the registry's validators.
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return true
	}
	var app interface{ Type() string }
	return errors.As(err, &app) && app.Type() == ErrTypeNotFound
}

// UpdateError is a failed registry update. Its message is the root cause
// (the probe's or validator's own words) rather than Temporal's wrapping
// chain; the chain stays reachable through Unwrap.
type UpdateError struct {
	Op  string
	Err error
}

func (e *UpdateError) Error() string { return e.Op + ": " + rootMessage(e.Err) }

func (e *UpdateError) Unwrap() error { return e.Err }

// rootMessage is the message of the innermost ApplicationError in err's
// chain, or err's own message when there is none.
func rootMessage(err error) string {
	msg := err.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		var app *temporal.ApplicationError
		if errors.As(e, &app) && app.Type() != "wrapError" && app.Message() != "" {
			msg = app.Message()
		}
	}
	return msg
}
