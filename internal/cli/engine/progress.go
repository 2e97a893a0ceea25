package engine

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentflow/agentflow/workflows"
)

// progressView renders a run's per-step progress from successive status
// documents. On a terminal it redraws one table in place (ANSI cursor up +
// clear); otherwise it prints one plain line per change, which reads well
// in CI logs and pipes.
type progressView struct {
	w       io.Writer
	tty     bool
	agentID string
	order   []string // plan order

	// tty state
	lines     int
	lastFrame string
	// plain state
	seen      map[string]string
	runStatus string
}

func newProgressView(w io.Writer, tty bool, agentID string, order []string) *progressView {
	return &progressView{w: w, tty: tty, agentID: agentID, order: order, seen: map[string]string{}}
}

// Update shows st; now is used for the elapsed time of running steps.
func (v *progressView) Update(st *workflows.Status, now time.Time) {
	if v.tty {
		v.redraw(renderFrame(v.agentID, v.order, st, now))
		return
	}
	v.plain(st)
}

func (v *progressView) redraw(frame string) {
	if frame == v.lastFrame {
		return
	}
	if v.lines > 0 {
		fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.lines)
	}
	io.WriteString(v.w, frame)
	v.lastFrame = frame
	v.lines = strings.Count(frame, "\n")
}

func (v *progressView) plain(st *workflows.Status) {
	// A run that started prints its status before its steps; a run that
	// ended prints it after them, so the log reads in causal order.
	runLine := func() {
		if st.Status != v.runStatus {
			fmt.Fprintf(v.w, "run %s %s %s\n", v.agentID, st.Status, st.Progress)
			v.runStatus = st.Status
		}
	}
	if !isTerminalRun(st.Status) {
		runLine()
	}
	defer runLine()
	recs := records(st)
	for _, id := range stepOrder(v.order, st) {
		r, ok := recs[id]
		if !ok || r.Status == v.seen[id] || r.Status == workflows.StepPending {
			continue
		}
		v.seen[id] = r.Status
		fmt.Fprintf(v.w, "step %s %s%s\n", id, r.Status, stepDetail(r))
	}
}

// stepOrder is the step_history order (when steps left pending) followed by
// any plan step not yet in it, so plain lines come out in the order things
// happened.
func stepOrder(plan []string, st *workflows.Status) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range st.StepHistory {
		if !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, r.ID)
		}
	}
	for _, id := range plan {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func records(st *workflows.Status) map[string]workflows.StepRecord {
	m := make(map[string]workflows.StepRecord, len(st.StepHistory))
	for _, r := range st.StepHistory {
		m[r.ID] = r
	}
	return m
}

// stepDetail is the parenthesised tail of a plain progress line.
func stepDetail(r workflows.StepRecord) string {
	var parts []string
	if r.Carried {
		parts = append(parts, "carried")
	}
	if r.Reason != "" {
		parts = append(parts, r.Reason)
	}
	if r.Attempts > 1 || (r.Attempts == 1 && isTerminalStep(r.Status)) {
		parts = append(parts, fmt.Sprintf("attempts %d", r.Attempts))
	}
	if r.DurationMS > 0 {
		parts = append(parts, formatMS(r.DurationMS))
	}
	s := ""
	if len(parts) > 0 {
		s = " (" + strings.Join(parts, ", ") + ")"
	}
	if r.Error != "" {
		s += ": " + oneLine(r.Error, 200)
	}
	return s
}

func isTerminalStep(s string) bool {
	switch s {
	case workflows.StepSuccess, workflows.StepFailed, workflows.StepSkipped, workflows.StepCanceled:
		return true
	}
	return false
}

var stepMarks = map[string]string{
	workflows.StepPending:         "·",
	workflows.StepRunning:         "▶",
	workflows.StepWaitingApproval: "?",
	workflows.StepSuccess:         "✓",
	workflows.StepFailed:          "✗",
	workflows.StepSkipped:         "-",
	workflows.StepCanceled:        "⊘",
}

// renderFrame is the terminal table: a header line and one row per step in
// plan order. The status marks are added after tabwriter has aligned the
// columns, because tabwriter counts bytes and the marks are multi-byte.
func renderFrame(agentID string, order []string, st *workflows.Status, now time.Time) string {
	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tSTATUS\tATTEMPTS\tDURATION\tNOTE")
	recs := records(st)
	marks := []string{" "}
	for _, id := range order {
		r, ok := recs[id]
		if !ok {
			r = workflows.StepRecord{ID: id, Status: workflows.StepPending}
		}
		attempts := ""
		if r.Attempts > 0 {
			attempts = fmt.Sprint(r.Attempts)
		}
		dur := ""
		switch {
		case r.DurationMS > 0:
			dur = formatMS(r.DurationMS)
		case r.StartedAt != nil && !isTerminalStep(r.Status) && now.After(*r.StartedAt):
			dur = formatMS(now.Sub(*r.StartedAt).Milliseconds())
		}
		note := r.Reason
		if r.Carried {
			note = strings.TrimSpace("carried " + note)
		}
		if r.Error != "" {
			note = strings.TrimSpace(note + " " + oneLine(r.Error, 60))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", id, r.Status, attempts, dur, note)
		mark := stepMarks[r.Status]
		if mark == "" {
			mark = " "
		}
		marks = append(marks, mark)
	}
	tw.Flush()
	var b strings.Builder
	fmt.Fprintf(&b, "agent %s  %s  %s\n", agentID, st.Status, st.Progress)
	// tabwriter pads the last column too; trailing spaces only make
	// terminals wrap.
	for i, line := range strings.Split(strings.TrimRight(tb.String(), "\n"), "\n") {
		fmt.Fprintf(&b, "  %s %s\n", marks[i], strings.TrimRight(line, " "))
	}
	return b.String()
}

// formatMS renders a duration compactly: 850ms, 1.2s, 3m04s.
func formatMS(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
