package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/internal/temporalconn/sdkconn"
	"github.com/agentflow/agentflow/internal/tracing"
	"github.com/agentflow/agentflow/workflows"
)

// dialTimeout bounds connecting to Temporal; an unreachable server should
// fail fast with a hint, not hang.
const dialTimeout = 10 * time.Second

// dialer opens a Temporal client. Verbs hold one so tests can swap it.
type dialer func(ctx context.Context) (client.Client, error)

// dial connects to Temporal at o.Address / o.Namespace, with the
// connection security of o.Security (TLS, mTLS, API key) and encrypting
// payloads when --codec-key-file is set. The SDK's own logging is
// discarded: agentctl reports errors itself.
//
// Tracing comes from the standard OTEL_* environment (off without an
// endpoint): the client carries the Temporal tracing interceptor, so
// `agentctl run` starts the run's trace and its context travels in the
// workflow's headers to the worker. Close flushes the spans, bounded.
func dial(ctx context.Context, o *Options) (client.Client, error) {
	codec, err := loadCodec(o)
	if err != nil {
		return nil, err
	}
	tp, err := tracing.Setup(ctx, tracing.Options{ServiceName: TracingServiceName, Logger: warnLogger(o.Streams.Err)})
	if err != nil {
		var ce *tracing.ConfigError
		if errors.As(err, &ce) {
			return nil, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("tracing: %w", err)}
		}
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("tracing: %w", err)}
	}
	interceptors, err := tp.ClientInterceptors()
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("tracing: %w", err)}
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	copts := client.Options{
		HostPort:     o.Address,
		Namespace:    o.Namespace,
		Logger:       tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		Interceptors: interceptors,
	}
	codec.Apply(&copts)
	if err := sdkconn.Apply(o.Security, &copts); err != nil {
		_ = tp.Shutdown(ctx)
		return nil, usageErr("%v", err)
	}
	c, err := client.DialContext(dctx, copts)
	if err != nil {
		_ = tp.Shutdown(ctx)
		hint := " (is `make up` running?)"
		if o.Security.Enabled() {
			hint = ""
		}
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("cannot reach Temporal at %s%s: %w", o.Address, hint, o.Security.Explain(err))}
	}
	if codec == nil && !tp.Enabled() {
		return c, nil
	}
	errOut := o.Streams.Err
	if errOut == nil {
		errOut = io.Discard
	}
	ec := engineClient{Client: c, dc: converter.GetDefaultDataConverter(), errOut: errOut}
	if codec != nil {
		ec.dc = copts.DataConverter
	}
	if tp.Enabled() {
		ec.tp = tp
	}
	return ec, nil
}

// TracingServiceName is agentctl's service.name unless OTEL_SERVICE_NAME
// sets one.
const TracingServiceName = "agentctl"

// engineClient is the client of a verb with the codec or tracing on: its
// data converter at hand for the payloads agentctl decodes itself from raw
// responses (history events, memos), and a Close that also flushes the
// spans it made (within tracing.ShutdownTimeout): agentctl exits right
// after.
type engineClient struct {
	client.Client
	dc     converter.DataConverter
	tp     *tracing.Provider // nil: tracing off
	errOut io.Writer
}

func (c engineClient) Close() {
	c.Client.Close()
	if c.tp == nil {
		return
	}
	if err := c.tp.Shutdown(context.Background()); err != nil {
		// A collector that is down costs the trace, never the command.
		fmt.Fprintf(c.errOut, "warning: tracing: %v\n", err)
	}
}

// warnLogger reports tracing export problems on stderr as warnings.
func warnLogger(w io.Writer) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// codecHint says what to do about a payload agentctl cannot decode: with
// the codec off, the one encoding it does not know is the codec's.
func codecHint(err error) error {
	if errors.Is(err, converter.ErrEncodingIsNotSupported) {
		return fmt.Errorf("%w (the payloads are encrypted? pass --codec-key-file)", err)
	}
	return err
}

// payloadConverter is the data converter of c's payloads: the codec's for
// a client dialled with --codec-key-file, else Temporal's default.
func payloadConverter(c client.Client) converter.DataConverter {
	if ec, ok := c.(engineClient); ok {
		return ec.dc
	}
	return converter.GetDefaultDataConverter()
}

// dialerFor returns the default dialer for o.
func dialerFor(o *Options) dialer {
	return func(ctx context.Context) (client.Client, error) { return dial(ctx, o) }
}

// serverErr marks an error from Temporal (exit 1) with context.
func serverErr(format string, a ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf(format, a...)}
}

// isNotFound reports that the workflow (agent) does not exist.
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// notFoundErr is the message for an unknown agent.
func notFoundErr(id string) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("agent %q not found", id)}
}

// queryTimeout bounds status queries: a query needs a worker, and without
// one Temporal would keep it pending.
const queryTimeout = 10 * time.Second

// queryStatus runs the status query against one run (runID "" = latest).
func queryStatus(ctx context.Context, c client.Client, id, runID string) (*workflows.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, id, runID, workflows.StatusQuery)
	if err != nil {
		return nil, err
	}
	var st workflows.Status
	if err := v.Get(&st); err != nil {
		return nil, fmt.Errorf("decode status of %s: %w", id, codecHint(err))
	}
	return &st, nil
}

// runInput reads the workflow input of a run from its first history event,
// so the exact Plan (with resolved images) a run used is always available
// without duplicating it in the memo.
func runInput(ctx context.Context, c client.Client, id, runID string) (*workflows.Input, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil, fmt.Errorf("history of %s is empty", id)
	}
	ev, err := it.Next()
	if err != nil {
		return nil, err
	}
	return inputFromEvent(payloadConverter(c), ev)
}

func inputFromEvent(dc converter.DataConverter, ev *historypb.HistoryEvent) (*workflows.Input, error) {
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return nil, fmt.Errorf("first history event is %s, not WorkflowExecutionStarted", ev.GetEventType())
	}
	if attrs.GetWorkflowType().GetName() != workflows.WorkflowName {
		return nil, fmt.Errorf("workflow is a %s, not an agent", attrs.GetWorkflowType().GetName())
	}
	payloads := attrs.GetInput().GetPayloads()
	if len(payloads) != 1 {
		return nil, fmt.Errorf("agent input: want 1 payload, got %d", len(payloads))
	}
	var in workflows.Input
	if err := dc.FromPayload(payloads[0], &in); err != nil {
		return nil, fmt.Errorf("decode agent input: %w", codecHint(err))
	}
	return &in, nil
}

// agentSummary is what visibility knows about a run without asking a
// worker: list rows and the inspect fallback.
type agentSummary struct {
	ID              string     `json:"id"`
	RunID           string     `json:"run_id"`
	Spec            string     `json:"spec,omitempty"`
	SpecVersion     string     `json:"spec_version,omitempty"`
	Status          string     `json:"status"`
	ExecutionStatus string     `json:"execution_status"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	ClosedAt        *time.Time `json:"closed_at,omitempty"`
}

// summarize reads a visibility record; dc decodes its memo (search
// attributes are never encoded).
func summarize(dc converter.DataConverter, info *workflowpb.WorkflowExecutionInfo) agentSummary {
	s := agentSummary{
		ID:              info.GetExecution().GetWorkflowId(),
		RunID:           info.GetExecution().GetRunId(),
		Spec:            keyword(info.GetSearchAttributes(), workflows.SearchAttrSpec),
		SpecVersion:     memoString(dc, info.GetMemo(), workflows.MemoSpecVersion),
		Status:          keyword(info.GetSearchAttributes(), workflows.SearchAttrStatus),
		ExecutionStatus: executionStatusName(info.GetStatus()),
	}
	if s.Spec == "" {
		s.Spec = memoString(dc, info.GetMemo(), workflows.MemoSpecName)
	}
	if t := info.GetStartTime(); t != nil {
		v := t.AsTime().UTC()
		s.StartedAt = &v
	}
	if t := info.GetCloseTime(); t != nil && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v := t.AsTime().UTC()
		s.ClosedAt = &v
	}
	s.Status = effectiveStatus(s.Status, info.GetStatus())
	return s
}

// effectiveStatus reconciles the AgentStatus search attribute with the
// execution status: an execution that was terminated or timed out never
// got to upsert a terminal AgentStatus, so the execution status wins then.
func effectiveStatus(agent string, ex enumspb.WorkflowExecutionStatus) string {
	if isTerminalRun(agent) || ex == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if agent == "" {
			return workflows.RunPending
		}
		return agent
	}
	switch ex {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return workflows.RunSucceeded
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return workflows.RunFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return workflows.RunCanceled
	default:
		return executionStatusName(ex)
	}
}

func isTerminalRun(s string) bool {
	switch s {
	case workflows.RunSucceeded, workflows.RunFailed, workflows.RunCanceled:
		return true
	}
	return false
}

// executionStatusName turns WORKFLOW_EXECUTION_STATUS_TIMED_OUT into TIMED_OUT.
func executionStatusName(s enumspb.WorkflowExecutionStatus) string {
	n := s.String()
	const prefix = "WorkflowExecutionStatus"
	if len(n) > len(prefix) && n[:len(prefix)] == prefix {
		n = n[len(prefix):]
	}
	return strings.ToUpper(camelToSnake(n))
}

func camelToSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func keyword(sa *commonpb.SearchAttributes, key string) string {
	p, ok := sa.GetIndexedFields()[key]
	if !ok {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// memoString reads one memo field; memos go through the client's data
// converter (so the codec encrypts them), unlike search attributes.
func memoString(dc converter.DataConverter, m *commonpb.Memo, key string) string {
	p, ok := m.GetFields()[key]
	if !ok {
		return ""
	}
	var s string
	if err := dc.FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// describeAgent returns the visibility summary of a run (runID "" =
// latest); an unknown agent is an ExitError.
func describeAgent(ctx context.Context, c client.Client, id, runID string) (agentSummary, error) {
	resp, err := c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		if isNotFound(err) {
			return agentSummary{}, notFoundErr(id)
		}
		return agentSummary{}, serverErr("describe agent %s: %w", id, err)
	}
	return summarize(payloadConverter(c), resp.GetWorkflowExecutionInfo()), nil
}
