package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// printDryRun is the table form of the dry-run report.
func printDryRun(w io.Writer, rep dryRunReport) {
	fmt.Fprintf(w, "spec %s %s: valid, nothing started (dry run)\n", rep.Spec, rep.Version)
	if len(rep.Inputs) > 0 {
		fmt.Fprintln(w, "inputs:")
		names := make([]string, 0, len(rep.Inputs))
		for k := range rep.Inputs {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			b, _ := json.Marshal(rep.Inputs[k])
			fmt.Fprintf(w, "  %s = %s\n", k, b)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tKIND\tIMAGE\tDEPENDS ON")
	for _, s := range rep.Steps {
		img := s.Image
		if s.Tool != "" {
			img = s.Tool + " → " + s.Image
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Kind, img, strings.Join(s.DependsOn, ","))
	}
	tw.Flush()
	if rep.Preflight != nil {
		printPreflight(w, rep.TaskQueue, rep.Preflight)
	}
	if len(rep.Secrets) > 0 {
		fmt.Fprintln(w, "secrets:")
		for _, s := range rep.Secrets {
			mark := "ok"
			if !s.OK {
				mark = "NOT RESOLVABLE"
			}
			fmt.Fprintf(w, "  %s (%s): %s, %s\n", s.Name, s.Source, mark, s.Note)
		}
	}
}
