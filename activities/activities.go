package activities

import (
	"context"
	"errors"
)

// Activities holds the dependencies of every agentflow activity. Activities
// are registered on the worker by method value (no name prefixes).
type Activities struct{}

// RunStep runs one attempt of one tool step: provision a sandbox with the
// step's workspace, exec /bin/tool with the rendered input, checkpoint,
// terminate. TODO(lead): being implemented.
func (a *Activities) RunStep(ctx context.Context, req StepRequest) (*StepResult, error) {
	return nil, errors.New("RunStep: not implemented yet")
}

// RunFinished records run metrics and delivers webhooks when a run ends.
func (a *Activities) RunFinished(ctx context.Context, ev RunEvent) error {
	return errors.New("RunFinished: not implemented yet")
}
