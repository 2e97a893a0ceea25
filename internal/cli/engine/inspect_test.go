package engine

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/workflows"
)

func TestAttemptsLine(t *testing.T) {
	lost := workflows.AttemptRecord{Attempt: 1, Status: workflows.AttemptFailed, Class: workflows.ClassInfrastructure,
		Type: "WorkerLost", Worker: "w-a"}
	tests := []struct {
		name     string
		hist     []workflows.AttemptRecord
		want     string
		wantShow bool
	}{
		{name: "no history (older runs)", hist: nil, want: "", wantShow: false},
		{name: "one clean attempt", hist: []workflows.AttemptRecord{{Attempt: 1, Status: workflows.AttemptSuccess, Worker: "w-a"}},
			want: "#1 success (w-a)", wantShow: false},
		{name: "one tool failure", hist: []workflows.AttemptRecord{{Attempt: 1, Status: workflows.AttemptFailed, Class: workflows.ClassTool, Type: "ToolFailed"}},
			want: "#1 ToolFailed (tool)", wantShow: false},
		{name: "one infrastructure failure", hist: []workflows.AttemptRecord{lost},
			want: "#1 WorkerLost (infrastructure, w-a)", wantShow: true},
		{name: "lost worker, then adopted", hist: []workflows.AttemptRecord{lost,
			{Attempt: 2, Status: workflows.AttemptSuccess, Worker: "w-b", AdoptedFrom: 1}},
			want: "#1 WorkerLost (infrastructure, w-a) · #2 success (w-b, adopted #1)", wantShow: true},
		{name: "tool retry, still running", hist: []workflows.AttemptRecord{
			{Attempt: 1, Status: workflows.AttemptFailed, Class: workflows.ClassTool, Type: "ToolTimeout", Worker: "w-a"},
			{Attempt: 2, Status: workflows.AttemptRunning}},
			want: "#1 ToolTimeout (tool, w-a) · #2 running", wantShow: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, show := attemptsLine(tc.hist)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantShow, show)
		})
	}
}

func TestInspectTableShowsAttempts(t *testing.T) {
	st := &workflows.Status{ID: "a-1", Status: workflows.RunSucceeded, Progress: "2/2", StepHistory: []workflows.StepRecord{
		{ID: "fetch", Status: workflows.StepSuccess, Attempts: 1, AttemptHistory: []workflows.AttemptRecord{
			{Attempt: 1, Status: workflows.AttemptSuccess, Worker: "w-a"}}},
		{ID: "summarize", Status: workflows.StepSuccess, Attempts: 2, AttemptHistory: []workflows.AttemptRecord{
			{Attempt: 1, Status: workflows.AttemptFailed, Class: workflows.ClassInfrastructure, Type: "SandboxLost", Worker: "w-a"},
			{Attempt: 2, Status: workflows.AttemptSuccess, Worker: "w-b"}}},
	}}
	var out bytes.Buffer
	printStatusTable(&inspectOptions{Options: &Options{Streams: Streams{Out: &out}}}, st)
	require.Contains(t, out.String(), "\nattempts:\n  summarize  #1 SandboxLost (infrastructure, w-a) · #2 success (w-b)\n")
	require.NotContains(t, out.String(), "  fetch  #1", "a single clean attempt gets no line")

	out.Reset()
	st.StepHistory = st.StepHistory[:1]
	printStatusTable(&inspectOptions{Options: &Options{Streams: Streams{Out: &out}}}, st)
	require.NotContains(t, out.String(), "attempts:")
}

func TestInspectTableShowsEgress(t *testing.T) {
	st := &workflows.Status{ID: "a-1", Status: workflows.RunSucceeded, StepHistory: []workflows.StepRecord{
		{ID: "fetch", Status: workflows.StepSuccess, Egress: []string{"techcrunch.com:443"}},
		{ID: "render", Status: workflows.StepSuccess},
		{ID: "post", Status: workflows.StepSuccess, Egress: []string{"slack.com:443 +Authorization", "*.slack-edge.com:443"}},
	}}
	var out bytes.Buffer
	printStatusTable(&inspectOptions{Options: &Options{Streams: Streams{Out: &out}}}, st)
	require.Contains(t, out.String(), "\negress:\n  fetch: techcrunch.com:443\n  post: slack.com:443 +Authorization, *.slack-edge.com:443\n")
	require.NotContains(t, out.String(), "  render:")

	out.Reset()
	st.StepHistory = st.StepHistory[1:2]
	printStatusTable(&inspectOptions{Options: &Options{Streams: Streams{Out: &out}}}, st)
	require.NotContains(t, out.String(), "egress:")
}
