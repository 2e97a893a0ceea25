package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/workflows"
)

// toolOptions are shared by the tool sub-verbs.
type toolOptions struct {
	*Options
	TaskQueue string
	Timeout   time.Duration

	dial dialer
	// resolveImage turns a mutable reference into an immutable one (--pin).
	resolveImage func(ctx context.Context, ref string) (string, error)
}

func newToolCmd(g *Options) *cobra.Command {
	o := &toolOptions{Options: g, dial: dialerFor(g), resolveImage: resolveLocalImage}
	cmd := &cobra.Command{
		Use: "tool",
		Long: `The tool registry maps name:version to a digest-pinned image. It lives in
Temporal itself: a long-lived workflow (ID agentflow-tool-registry) whose state
is the registry, changed by validated Updates and read by a query, so there is
no extra database. 'agentctl run' resolves every 'tool: name:version' through
it at submission and records the digest in the run.`,
		Example: `  agentctl tool register --name echo --version 1.0 --image sha256:4f1c...
  agentctl tool list
  agentctl tool show echo:1.0
  agentctl tool rm echo:1.0`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&o.TaskQueue, "task-queue", workflows.TaskQueue, "task queue of the workers (registry and probes run there)")
	cmd.PersistentFlags().DurationVar(&o.Timeout, "timeout", 3*time.Minute, "give up waiting for the registry after this long")
	cmd.AddCommand(newToolRegisterCmd(o), newToolListCmd(o), newToolShowCmd(o), newToolRmCmd(o))
	return cmd
}

// withRegistry dials Temporal and runs fn with a registry client under the
// --timeout deadline.
func (o *toolOptions) withRegistry(ctx context.Context, fn func(context.Context, *registry.Client) error) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	err = fn(ctx, &registry.Client{Temporal: c, TaskQueue: o.TaskQueue})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return serverErr("tool registry did not answer in time (is a worker running on task queue %q?): %v", o.TaskQueue, err)
	}
	return err
}

type toolRegisterOptions struct {
	*toolOptions
	registry.RegisterRequest
	Pin bool
}

func newToolRegisterCmd(parent *toolOptions) *cobra.Command {
	o := &toolRegisterOptions{toolOptions: parent}
	cmd := &cobra.Command{
		Use:   "register --name N --version V --image REF [--description D] [--pin]",
		Short: "Register a tool image under name:version",
		Long: `Register an image as name:version. REF must be immutable: repo@sha256:<digest>
or a local image ID sha256:<64 hex>. A mutable tag is refused unless --pin,
which resolves it through the local Docker daemon (agentctl must run where
that daemon is) and stores the RepoDigest, or the image ID when the image has
none. A worker then runs the image's '/bin/tool --version' in a sandbox (it
must print V) and keeps '/bin/tool --help' as the usage. Registering the
same name:version with the same digest again is a no-op; with another
digest it is refused.`,
		Example: `  agentctl tool register --name rss-fetcher --version 1.1 --image sha256:4f1c...
  agentctl tool register --name echo --version 1.0 --image agentflow/tool-echo:1.0 --pin`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runToolRegister(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "", "tool name")
	f.StringVar(&o.Version, "version", "", "tool version (what /bin/tool --version prints)")
	f.StringVar(&o.Image, "image", "", "image: repo@sha256:<digest> or sha256:<image id> (a tag with --pin)")
	f.StringVar(&o.Description, "description", "", "one-line description")
	f.BoolVar(&o.Pin, "pin", false, "resolve a mutable tag to its digest via the local Docker daemon")
	return cmd
}

func runToolRegister(ctx context.Context, o *toolRegisterOptions) error {
	var missing []string
	for flag, v := range map[string]string{"--name": o.Name, "--version": o.Version, "--image": o.Image} {
		if v == "" {
			missing = append(missing, flag)
		}
	}
	if len(missing) > 0 {
		return usageErr("tool register: %s required", strings.Join(slices.Sorted(slices.Values(missing)), ", "))
	}
	req := o.RegisterRequest
	if errors.Join(registry.ValidateName(req.Name), registry.ValidateVersion(req.Version)) != nil {
		return usageErr("%v", errors.Join(registry.ValidateName(req.Name), registry.ValidateVersion(req.Version)))
	}
	if err := registry.ValidateImageRef(req.Image); err != nil {
		if !o.Pin {
			return usageErr("%v", err)
		}
		pinned, perr := o.resolveImage(ctx, req.Image)
		if perr != nil {
			return perr
		}
		req.PinnedFrom, req.Image = req.Image, pinned
		if err := registry.ValidateImageRef(req.Image); err != nil {
			return usageErr("--pin resolved %s to %s: %v", req.PinnedFrom, req.Image, err)
		}
	}
	if o.Output != "json" {
		fmt.Fprintf(o.Streams.Err, "registering %s:%s (%s): probing /bin/tool on a worker...\n", req.Name, req.Version, req.Image)
	}
	var t registry.Tool
	err := o.withRegistry(ctx, func(ctx context.Context, rc *registry.Client) error {
		var err error
		t, err = rc.Register(ctx, req)
		return err
	})
	if err != nil {
		if errors.Is(err, registry.ErrInvalid) {
			return usageErr("%v", err)
		}
		var ee *ExitError
		if errors.As(err, &ee) {
			return err
		}
		return serverErr("%v", err)
	}
	if o.Output == "json" {
		return writeJSON(o.Streams.Out, t)
	}
	fmt.Fprintf(o.Streams.Out, "registered %s → %s\n", t.Ref(), t.Image)
	return nil
}

func newToolListCmd(o *toolOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List registered tools",
		Example: `  agentctl tool list -o json`,
		Args:    argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var tools []registry.Tool
			err := o.withRegistry(cmd.Context(), func(ctx context.Context, rc *registry.Client) error {
				ctx, cancel := context.WithTimeout(ctx, queryTimeout)
				defer cancel()
				var err error
				tools, err = rc.List(ctx)
				return err
			})
			if err != nil {
				return asServerErr(err)
			}
			if o.Output == "json" {
				if tools == nil {
					tools = []registry.Tool{}
				}
				return writeJSON(o.Streams.Out, tools)
			}
			tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tIMAGE\tREGISTERED\tDESCRIPTION")
			for _, t := range tools {
				ts := t.RegisteredAt
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Version, shortImage(t.Image), fmtTime(&ts), oneLine(t.Description, 60))
			}
			return tw.Flush()
		},
	}
}

func newToolShowCmd(o *toolOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME[:VERSION]",
		Short: "Show a tool's versions, images and usage",
		Example: `  agentctl tool show rss-fetcher
  agentctl tool show rss-fetcher:1.1 -o json`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, err := registry.ParseRef(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			var tools []registry.Tool
			err = o.withRegistry(cmd.Context(), func(ctx context.Context, rc *registry.Client) error {
				ctx, cancel := context.WithTimeout(ctx, queryTimeout)
				defer cancel()
				all, err := rc.List(ctx)
				for _, t := range all {
					if t.Name == name && (version == "" || t.Version == version) {
						tools = append(tools, t)
					}
				}
				return err
			})
			if err != nil {
				return asServerErr(err)
			}
			if len(tools) == 0 {
				return serverErr("tool %s is not registered", args[0])
			}
			if o.Output == "json" {
				if version != "" {
					return writeJSON(o.Streams.Out, tools[0])
				}
				return writeJSON(o.Streams.Out, tools)
			}
			for i, t := range tools {
				if i > 0 {
					fmt.Fprintln(o.Streams.Out)
				}
				printTool(o.Options, t)
			}
			return nil
		},
	}
}

func printTool(o *Options, t registry.Tool) {
	tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "TOOL\t%s\nIMAGE\t%s\nDIGEST\t%s\n", t.Ref(), t.Image, t.Digest)
	if t.PinnedFrom != "" {
		fmt.Fprintf(tw, "PINNED FROM\t%s\n", t.PinnedFrom)
	}
	if t.Description != "" {
		fmt.Fprintf(tw, "DESCRIPTION\t%s\n", t.Description)
	}
	ts := t.RegisteredAt
	fmt.Fprintf(tw, "REGISTERED\t%s\n", fmtTime(&ts))
	tw.Flush()
	if strings.TrimSpace(t.Usage) != "" {
		fmt.Fprintf(o.Streams.Out, "USAGE\n%s", t.Usage)
		if !strings.HasSuffix(t.Usage, "\n") {
			fmt.Fprintln(o.Streams.Out)
		}
	}
}

func newToolRmCmd(o *toolOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME[:VERSION]",
		Aliases: []string{"remove"},
		Short:   "Remove a tool version (or every version of a tool)",
		Long: `Remove name:version, or every version of name. Runs already started keep
their recorded digests; new runs that use the tool are refused.`,
		Example: `  agentctl tool rm echo:1.0
  agentctl tool rm echo`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, err := registry.ParseRef(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			var removed []registry.Tool
			err = o.withRegistry(cmd.Context(), func(ctx context.Context, rc *registry.Client) error {
				removed, err = rc.Remove(ctx, registry.RemoveRequest{Name: name, Version: version})
				return err
			})
			if err != nil {
				if errors.Is(err, registry.ErrNotRegistered) {
					return serverErr("tool %s is not registered", args[0])
				}
				return asServerErr(err)
			}
			if o.Output == "json" {
				return writeJSON(o.Streams.Out, removed)
			}
			for _, t := range removed {
				fmt.Fprintf(o.Streams.Out, "removed %s (%s)\n", t.Ref(), t.Image)
			}
			return nil
		},
	}
}

// asServerErr keeps ExitErrors and turns anything else into exit 1.
func asServerErr(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return serverErr("%v", err)
}

// shortImage abbreviates digests in tables: sha256:4f1c2a3b4c5d….
func shortImage(ref string) string {
	i := strings.LastIndex(ref, "sha256:")
	if i < 0 || len(ref) < i+7+12 {
		return ref
	}
	return ref[:i+7+12] + "…"
}
