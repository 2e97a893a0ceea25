package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// ManagedLabel is the label every agentflow sandbox carries
// (exechost/docker/policy.LabelManaged, not imported here so this package
// stays free of the host's code).
const ManagedLabel = "agentflow.managed=true"

// Leftover is a container or network that a package's tests created and
// did not remove.
type Leftover struct {
	Kind  string // container | network
	ID    string
	Name  string
	State string
}

func (l Leftover) String() string {
	return fmt.Sprintf("%s %s %s %s", l.Kind, l.ID, l.Name, l.State)
}

// snapshot lists the containers (any state) and networks carrying every
// label of scope.
func snapshot(ctx context.Context, c client.APIClient, scope []string) ([]Leftover, error) {
	args := filters.NewArgs()
	for _, l := range scope {
		args.Add("label", l)
	}
	cs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	ns, err := c.NetworkList(ctx, network.ListOptions{Filters: args})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	var out []Leftover
	for _, s := range cs {
		out = append(out, Leftover{Kind: "container", ID: short(s.ID), Name: strings.Join(s.Names, ","), State: s.State})
	}
	for _, n := range ns {
		out = append(out, Leftover{Kind: "network", ID: short(n.ID), Name: n.Name})
	}
	return out, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Tracker records which containers and networks of a scope exist, so that
// only those created afterwards count as leftovers: a stale container from
// an earlier run or from another suite cannot fail this one.
type Tracker struct {
	c      client.APIClient
	scope  []string
	before map[string]bool
}

// Track snapshots the containers and networks carrying every label of
// scope (ManagedLabel when scope is empty).
func Track(ctx context.Context, c client.APIClient, scope ...string) (*Tracker, error) {
	if len(scope) == 0 {
		scope = []string{ManagedLabel}
	}
	list, err := snapshot(ctx, c, scope)
	if err != nil {
		return nil, err
	}
	tr := &Tracker{c: c, scope: slices.Clone(scope), before: map[string]bool{}}
	for _, l := range list {
		tr.before[l.Kind+"/"+l.ID] = true
	}
	return tr, nil
}

// Leftovers lists what carries the scope now and did not exist at Track.
func (tr *Tracker) Leftovers(ctx context.Context) ([]Leftover, error) {
	list, err := snapshot(ctx, tr.c, tr.scope)
	if err != nil {
		return nil, err
	}
	var out []Leftover
	for _, l := range list {
		if !tr.before[l.Kind+"/"+l.ID] {
			out = append(out, l)
		}
	}
	return out, nil
}

// Main runs a package's tests (call it from TestMain) and turns the exit
// code into a failure when a container or network carrying every label of
// scope (ManagedLabel when empty) was created during the run and is still
// there at the end; it prints each one. Scope the check to labels only
// this package's tests set (a per-process suite label) when other suites
// may create sandboxes at the same time. Without a daemon there is nothing
// to check (the Docker gate skips or fails the tests themselves).
func Main(m Runner, scope ...string) int {
	return mainWith(m.Run, os.Stderr, scope...)
}

// Runner is what Main runs: a *testing.M, or a wrapper that runs it
// several times (once per sandbox runtime, say).
type Runner interface{ Run() int }

func mainWith(run func() int, stderr io.Writer, scope ...string) int {
	ctx := context.Background()
	c, err := DockerClient(ctx)
	if err != nil {
		return run()
	}
	defer c.Close()
	tr, err := Track(ctx, c, scope...)
	if err != nil {
		fmt.Fprintf(stderr, "leftover check: %v\n", err)
		return 1
	}
	code := run()
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	left, err := tr.Leftovers(lctx)
	if err != nil {
		fmt.Fprintf(stderr, "leftover check: %v\n", err)
		return 1
	}
	for _, l := range left {
		fmt.Fprintf(stderr, "LEFTOVER %s\n", l)
	}
	if len(left) > 0 && code == 0 {
		code = 1
	}
	return code
}
