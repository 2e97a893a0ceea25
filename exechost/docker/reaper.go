package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

// ReaperClient is the part of the Docker client the reaper uses.
type ReaperClient interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, networkID string) error
}

// ReapOptions configure one sweep.
type ReapOptions struct {
	// Owner is the calling process's owner label; its live sandboxes are
	// left alone unless Keep says they are unknown.
	Owner string
	// OwnerAlive reports whether another owner still runs (default
	// LocalOwnerAlive).
	OwnerAlive func(owner string) bool
	// Keep, when set, reports whether a sandbox of Owner is still tracked;
	// untracked ones are leftovers of failed provisions and are reaped.
	Keep func(id exechost.ExecutionID) bool
	// CreatedGrace is how long a created-but-never-started sandbox may
	// exist (default 1 minute: provisioning starts it within moments).
	CreatedGrace time.Duration
	// Labels narrow the sweep to sandboxes carrying all of them.
	Labels map[string]string
	Now    func() time.Time
	Logger *slog.Logger
}

// Reaped is one removed sandbox, egress proxy or egress network.
type Reaped struct {
	// ContainerID is the container's ID, or the network's (Role
	// policy.RoleEgressNetwork).
	ContainerID string
	ExecutionID exechost.ExecutionID
	Owner       string
	Reason      string // deadline, never_started, exited, owner_gone, untracked
	// Role is "" for a sandbox, else policy.RoleEgressProxy or
	// policy.RoleEgressNetwork.
	Role string
}

// Reap removes agentflow sandboxes that should not exist any more: past
// their deadline, created but never started, exited but not removed, owned
// by a process that is gone, or (with Keep) owned by us but not tracked.
// Egress proxies are containers like sandboxes and go by the same rules;
// egress networks go by the deadline, owner and Keep rules, after the
// containers (a network with members cannot be removed; one whose last
// member is still going is left to the next sweep).
// The worker calls it at start-up and then periodically.
func Reap(ctx context.Context, c ReaperClient, opts ReapOptions) ([]Reaped, error) {
	if opts.OwnerAlive == nil {
		opts.OwnerAlive = LocalOwnerAlive
	}
	if opts.CreatedGrace <= 0 {
		opts.CreatedGrace = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := filters.NewArgs(filters.Arg("label", policy.LabelManaged+"=true"))
	for k, v := range opts.Labels {
		f.Add("label", k+"="+v)
	}
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("reap: list sandboxes: %w", err)
	}
	now := opts.Now()
	var reaped []Reaped
	var errs []error
	for _, s := range list {
		reason := reapReason(s, opts, now)
		if reason == "" {
			continue
		}
		err := c.ContainerRemove(ctx, s.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
			errs = append(errs, fmt.Errorf("reap %s: %w", s.ID, err))
			continue
		}
		r := Reaped{ContainerID: s.ID, ExecutionID: exechost.ExecutionID(s.Labels[policy.LabelExecution]),
			Owner: s.Labels[policy.LabelOwner], Reason: reason, Role: s.Labels[policy.LabelRole]}
		opts.Logger.Info("reaped sandbox", "container_id", r.ContainerID, "execution_id", r.ExecutionID,
			"owner", r.Owner, "reason", r.Reason, "role", r.Role)
		reaped = append(reaped, r)
	}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return reaped, errors.Join(append(errs, fmt.Errorf("reap: list egress networks: %w", err))...)
	}
	for _, n := range nets {
		reason := networkReapReason(n, opts, now)
		if reason == "" {
			continue
		}
		err := c.NetworkRemove(ctx, n.ID)
		switch {
		case errdefs.IsForbidden(err) || errdefs.IsConflict(err):
			continue // members still going: the next sweep
		case err != nil && !errdefs.IsNotFound(err):
			errs = append(errs, fmt.Errorf("reap network %s: %w", n.ID, err))
			continue
		}
		r := Reaped{ContainerID: n.ID, ExecutionID: exechost.ExecutionID(n.Labels[policy.LabelExecution]),
			Owner: n.Labels[policy.LabelOwner], Reason: reason, Role: policy.RoleEgressNetwork}
		opts.Logger.Info("reaped egress network", "network_id", r.ContainerID, "execution_id", r.ExecutionID,
			"owner", r.Owner, "reason", r.Reason)
		reaped = append(reaped, r)
	}
	return reaped, errors.Join(errs...)
}

// networkReapReason is reapReason for an execution's network. A network
// of a live execution of another owner is left alone until its deadline.
func networkReapReason(n network.Summary, opts ReapOptions, now time.Time) string {
	owner := n.Labels[policy.LabelOwner]
	if d, err := strconv.ParseInt(n.Labels[policy.LabelDeadline], 10, 64); err != nil || now.After(time.Unix(d, 0).Add(time.Second)) {
		return "deadline"
	}
	if owner == opts.Owner {
		if opts.Keep != nil && !opts.Keep(exechost.ExecutionID(n.Labels[policy.LabelExecution])) {
			return "untracked"
		}
		return ""
	}
	if !opts.OwnerAlive(owner) {
		return "owner_gone"
	}
	return ""
}

func reapReason(s container.Summary, opts ReapOptions, now time.Time) string {
	owner := s.Labels[policy.LabelOwner]
	mine := owner == opts.Owner
	if d, err := strconv.ParseInt(s.Labels[policy.LabelDeadline], 10, 64); err != nil || now.After(time.Unix(d, 0).Add(time.Second)) {
		return "deadline" // a missing or broken deadline counts as passed
	}
	switch s.State {
	case container.StateCreated:
		if now.Sub(time.Unix(s.Created, 0)) > opts.CreatedGrace {
			return "never_started"
		}
		return ""
	case container.StateExited, container.StateDead:
		return "exited"
	}
	if mine {
		if opts.Keep != nil && !opts.Keep(exechost.ExecutionID(s.Labels[policy.LabelExecution])) {
			return "untracked"
		}
		return ""
	}
	if !opts.OwnerAlive(owner) {
		return "owner_gone"
	}
	return ""
}
