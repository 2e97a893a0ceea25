package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/spec"
)

type validateOptions struct {
	*Options
	Files []string
}

func newValidateCmd(g *Options) *cobra.Command {
	o := &validateOptions{Options: g}
	cmd := &cobra.Command{
		Use:   "validate -f spec.yaml [-f other.yaml]",
		Short: "Check specs statically (no server needed)",
		Long: `Parse, validate and compile specs exactly as 'run' does, without contacting
Temporal. Every problem is reported as file:line:col: message. Exit code 2 when
any spec is invalid.`,
		Example: `  agentctl validate -f specs/daily-tech-news.yaml
  agentctl validate -f a.yaml -f b.yaml -o json`,
		Args: ArgsUsage(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files = append(o.Files, args...)
			if len(o.Files) == 0 {
				return UsageErr("validate: no spec given (use -f spec.yaml)")
			}
			return runValidate(o)
		},
	}
	cmd.Flags().StringArrayVarP(&o.Files, "file", "f", nil, "spec file (repeatable)")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

// validationReport is the -o json document of validate.
type validationReport struct {
	File    string          `json:"file"`
	Valid   bool            `json:"valid"`
	Name    string          `json:"name,omitempty"`
	Version string          `json:"version,omitempty"`
	Steps   int             `json:"steps,omitempty"`
	Errors  []problemReport `json:"errors,omitempty"`
}

type problemReport struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

func runValidate(o *validateOptions) error {
	var reports []validationReport
	invalid := false
	for _, f := range o.Files {
		r := validationReport{File: f}
		plan, err := spec.LoadFile(f)
		if err != nil {
			invalid = true
			r.Errors = problems(err)
		} else {
			r.Valid, r.Name, r.Version, r.Steps = true, plan.Name, plan.Version, len(plan.Steps)
		}
		reports = append(reports, r)
		if o.Output == "json" {
			continue
		}
		if err != nil {
			PrintProblems(o.Streams.Err, err)
			continue
		}
		fmt.Fprintf(o.Streams.Out, "%s: valid (%s %s, %d steps)\n", f, plan.Name, plan.Version, len(plan.Steps))
	}
	if o.Output == "json" {
		enc := json.NewEncoder(o.Streams.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return err
		}
	}
	if invalid {
		return &ExitError{Code: ExitInvalid, Silent: true}
	}
	return nil
}

// problems flattens a spec error into report rows.
func problems(err error) []problemReport {
	var list spec.ErrorList
	if errors.As(err, &list) {
		out := make([]problemReport, 0, len(list))
		for _, e := range list {
			out = append(out, problemReport{Line: e.Line, Col: e.Col, Path: e.Path, Message: e.Msg})
		}
		return out
	}
	var one *spec.Error
	if errors.As(err, &one) {
		return []problemReport{{Line: one.Line, Col: one.Col, Path: one.Path, Message: one.Msg}}
	}
	return []problemReport{{Message: err.Error()}}
}

// PrintProblems writes one file:line:col: message line per problem.
func PrintProblems(w interface{ Write([]byte) (int, error) }, err error) {
	var list spec.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(w, e.Error())
		}
		return
	}
	fmt.Fprintln(w, err.Error())
}
