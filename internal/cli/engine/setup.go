package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentflow/agentflow/internal/temporalconn"
	"github.com/agentflow/agentflow/workflows"
)

type setupOptions struct {
	*Options
	CreateNamespace bool
	Retention       time.Duration
	Wait            time.Duration
	// WaitForServer keeps dialing an unreachable server this long: a
	// setup job started together with its cluster (compose, a Kubernetes
	// Job) must not race the server's start.
	WaitForServer time.Duration

	dial dialer
	// poll is how often --wait asks again (tests shorten it).
	poll time.Duration
}

// Default retention of a namespace setup creates: what `temporal operator
// namespace create` uses.
const defaultSetupRetention = 72 * time.Hour

func newSetupCmd(g *Options) *cobra.Command {
	o := &setupOptions{Options: g, dial: dialerFor(g), poll: time.Second}
	cmd := &cobra.Command{
		Use: "setup [--create-namespace] [--retention 72h] [--wait 30s]",
		Long: `Prepare a Temporal namespace for agentflow, idempotently, and say what was done:
with --create-namespace, create the namespace (--namespace) when it does not
exist; register the search attributes agentflow's runs carry (` + strings.Join(workflows.SearchAttributes, ", ") + `,
all Keyword) where they are missing. Running it again changes nothing.

The dev server (agentctl dev, make up) registers them itself; every other
cluster needs this once per namespace, by an identity allowed to use the
operator service. An attribute that exists with another type is reported
and left alone (exit 1): agentflow cannot use it.

A new namespace or attribute takes a few seconds to reach every frontend of a
cluster; --wait (default 30s, 0 = do not wait) waits until both are visible.`,
		Example: `  agentctl setup
  agentctl setup --namespace agents --create-namespace --retention 720h
  agentctl --address temporal.internal:7233 --namespace prod setup -o json
  agentctl --address temporal:7233 setup --create-namespace --wait-for-server 3m   # a job started with its cluster`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Retention < 24*time.Hour {
				return usageErr("--retention must be at least 24h (Temporal's minimum)")
			}
			if o.Wait < 0 || o.WaitForServer < 0 {
				return usageErr("--wait and --wait-for-server must not be negative")
			}
			return runSetup(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.CreateNamespace, "create-namespace", false, "create the namespace when it does not exist")
	cmd.Flags().DurationVar(&o.Retention, "retention", defaultSetupRetention, "retention of closed runs in a namespace created by --create-namespace")
	cmd.Flags().DurationVar(&o.Wait, "wait", 30*time.Second, "wait until the namespace and attributes are visible (0: do not wait)")
	cmd.Flags().DurationVar(&o.WaitForServer, "wait-for-server", 0,
		"keep trying to reach a server that does not answer yet, up to this long (a setup job started with its cluster); a certificate failure is not waited out")
	return cmd
}

// setupAction is one thing setup found or did.
type setupAction struct {
	Kind   string `json:"kind"` // namespace | search_attribute
	Name   string `json:"name"`
	Type   string `json:"type,omitempty"`
	Action string `json:"action"` // present | created | added | conflict
	Note   string `json:"note,omitempty"`
}

func (a setupAction) line() string {
	what := "namespace " + a.Name
	if a.Kind == "search_attribute" {
		what = fmt.Sprintf("search attribute %s (%s)", a.Name, a.Type)
	}
	if a.Note != "" {
		return fmt.Sprintf("%s: %s, %s", what, a.Action, a.Note)
	}
	return fmt.Sprintf("%s: %s", what, a.Action)
}

func runSetup(ctx context.Context, o *setupOptions) error {
	c, err := dialUntil(ctx, o.dial, o.WaitForServer, o.poll)
	if err != nil {
		return err
	}
	defer c.Close()
	var actions []setupAction
	ns, err := setupNamespace(ctx, c, o)
	if err != nil {
		return err
	}
	actions = append(actions, ns)
	sas, err := setupSearchAttributes(ctx, c, o)
	if err != nil {
		return err
	}
	actions = append(actions, sas...)

	var conflicts []string
	for _, a := range actions {
		if a.Action == "conflict" {
			conflicts = append(conflicts, a.Name)
		}
	}
	if o.Output == "json" {
		if err := writeJSON(o.Streams.Out, map[string]any{"namespace": o.Namespace, "actions": actions}); err != nil {
			return err
		}
	} else {
		for _, a := range actions {
			fmt.Fprintln(o.Streams.Out, a.line())
		}
	}
	if len(conflicts) > 0 {
		return serverErr("search attributes %s exist with another type: agentflow needs Keyword (rename or remove them on the cluster)",
			strings.Join(conflicts, ", "))
	}
	return nil
}

func setupNamespace(ctx context.Context, c client.Client, o *setupOptions) (setupAction, error) {
	a := setupAction{Kind: "namespace", Name: o.Namespace, Action: "present"}
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: o.Namespace})
	switch {
	case err == nil:
		return a, nil
	case !isNamespaceNotFound(err):
		return a, serverErr("describe namespace %s: %w", o.Namespace, err)
	case !o.CreateNamespace:
		return a, serverErr("namespace %s does not exist: create it with `agentctl setup --create-namespace` (or `temporal operator namespace create %s`)",
			o.Namespace, o.Namespace)
	}
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        o.Namespace,
		Description:                      "agentflow",
		WorkflowExecutionRetentionPeriod: durationpb.New(o.Retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	switch {
	case errors.As(err, &exists):
		return a, nil // created by someone else meanwhile
	case err != nil:
		return a, serverErr("create namespace %s: %w", o.Namespace, err)
	}
	a.Action, a.Note = "created", "retention "+o.Retention.String()
	// Each service learns of a new namespace on its own schedule: wait
	// until both the frontend and the operator service know it.
	if err := waitFor(ctx, o, "namespace "+o.Namespace, func(ctx context.Context) (bool, error) {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: o.Namespace})
		if err == nil {
			_, err = c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: o.Namespace})
		}
		if isNamespaceNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return a, err
	}
	return a, nil
}

func isNamespaceNotFound(err error) bool {
	var nf *serviceerror.NamespaceNotFound
	return errors.As(err, &nf) || isNotFound(err)
}

func setupSearchAttributes(ctx context.Context, c client.Client, o *setupOptions) ([]setupAction, error) {
	have, err := customSearchAttributes(ctx, c, o.Namespace)
	if err != nil {
		return nil, err
	}
	keyword := enumspb.INDEXED_VALUE_TYPE_KEYWORD
	var actions []setupAction
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range workflows.SearchAttributes {
		a := setupAction{Kind: "search_attribute", Name: name, Type: "Keyword", Action: "present"}
		switch t, ok := have[name]; {
		case !ok:
			missing[name] = keyword
			a.Action = "added"
		case t != keyword:
			a.Action, a.Note = "conflict", "exists as "+typeName(t)
		}
		actions = append(actions, a)
	}
	if len(missing) == 0 {
		return actions, nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: o.Namespace, SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return nil, serverErr("register search attributes on namespace %s: %w", o.Namespace, err)
	}
	err = waitFor(ctx, o, "search attributes", func(ctx context.Context) (bool, error) {
		have, err := customSearchAttributes(ctx, c, o.Namespace)
		if err != nil {
			return false, err
		}
		for name := range missing {
			if _, ok := have[name]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	return actions, err
}

func customSearchAttributes(ctx context.Context, c client.Client, ns string) (map[string]enumspb.IndexedValueType, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, serverErr("list search attributes of namespace %s: %w", ns, err)
	}
	return resp.GetCustomAttributes(), nil
}

// typeName is the type as Temporal's CLI spells it (Keyword, Text, …).
func typeName(t enumspb.IndexedValueType) string {
	s := strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
	parts := strings.Split(strings.ToLower(s), "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// waitFor polls ready until it is true, for up to --wait; 0 does not wait.
func waitFor(ctx context.Context, o *setupOptions, what string, ready func(context.Context) (bool, error)) error {
	if o.Wait == 0 {
		return nil
	}
	deadline := time.Now().Add(o.Wait)
	for {
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("not visible yet")
			}
			return serverErr("%s: still not visible after %s (a cluster's frontends pick changes up within seconds; run setup again to check): %w", what, o.Wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.poll):
		}
	}
}

// missingSearchAttributes explains a start refused because the cluster
// lacks agentflow's search attributes, or returns nil when err is not that.
func missingSearchAttributes(err error) error {
	var inv *serviceerror.InvalidArgument
	if !errors.As(err, &inv) || !strings.Contains(strings.ToLower(inv.Message), "search attribute") {
		return nil
	}
	if !slices.ContainsFunc(workflows.SearchAttributes, func(sa string) bool { return strings.Contains(inv.Message, sa) }) {
		return nil
	}
	return serverErr("this namespace lacks agentflow's search attributes (%s): run `agentctl setup` once against this cluster and namespace (Temporal said: %s)",
		strings.Join(workflows.SearchAttributes, ", "), inv.Message)
}

// dialUntil dials, and while the server does not answer, again every poll
// until wait has passed. A certificate failure ends the wait at once:
// time does not fix a wrong CA.
func dialUntil(ctx context.Context, dial dialer, wait, poll time.Duration) (client.Client, error) {
	deadline := time.Now().Add(wait)
	for {
		c, err := dial(ctx)
		var exit *ExitError
		if err == nil || time.Now().After(deadline) || temporalconn.IsCertificateFailure(err) ||
			(errors.As(err, &exit) && exit.Code != ExitFailure) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(poll):
		}
	}
}
