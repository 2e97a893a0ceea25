package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/graph"
	"github.com/agentflow/agentflow/internal/spec"
)

func newGraphCmd(g *Options) *cobra.Command {
	var file, format string
	cmd := &cobra.Command{
		Use:   "graph -f spec.yaml [--format mermaid|dot]",
		Short: "Print the step DAG of a spec",
		Long:  "Print the DAG, including implicit dependencies from .steps.X references (dashed).",
		Example: `  agentctl graph -f specs/daily-tech-news.yaml
  agentctl graph -f specs/complaint-handler.yaml --format dot | dot -Tsvg > g.svg`,
		Args: ArgsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return UsageErr("graph: no spec given (use -f spec.yaml)")
			}
			if format != "mermaid" && format != "dot" {
				return UsageErr("graph: invalid --format %q: want mermaid or dot", format)
			}
			plan, err := spec.LoadFile(file)
			if err != nil {
				PrintProblems(g.Streams.Err, err)
				return &ExitError{Code: ExitInvalid, Silent: true}
			}
			out, err := graph.Render(plan, format)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(g.Streams.Out, out)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "spec file")
	cmd.Flags().StringVar(&format, "format", "mermaid", "mermaid or dot")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"mermaid", "dot"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
