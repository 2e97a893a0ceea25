// Package tracingtest is an OTLP trace receiver for tests: it accepts
// exports over OTLP/gRPC (the TraceService of the published
// go.opentelemetry.io/proto/otlp protos) and OTLP/HTTP with protobuf bodies
// (POST /v1/traces), on loopback, and records every span.
//
// It is ours, not the OpenTelemetry Collector or Jaeger (neither builds
// here in reasonable time): a receiver, not a backend. It decodes what a
// real exporter sends over the real wire protocols, which is what the
// tests need to check: which spans reach a collector, in which trace,
// under which parent.
package tracingtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened: IDs in lower-case hex (the parent
// "" for a root), attribute values as strings.
type Span struct {
	TraceID       string
	SpanID        string
	ParentSpanID  string
	Name          string
	Kind          string
	Service       string // the resource's service.name
	Attributes    map[string]string
	StatusCode    string // "Unset", "Ok", "Error"
	StatusMessage string
	Events        []Event
	Start, End    time.Time
	Protocol      string // "grpc" or "http"
}

// Event is one span event (e.g. "exception").
type Event struct {
	Name       string
	Attributes map[string]string
}

// Receiver records the spans exported to it.
type Receiver struct {
	// GRPCEndpoint and HTTPEndpoint are the values for
	// OTEL_EXPORTER_OTLP_ENDPOINT with protocol grpc or http/protobuf.
	GRPCEndpoint string
	HTTPEndpoint string

	mu      sync.Mutex
	spans   []Span
	headers []map[string]string // request metadata of each export
	changed chan struct{}       // closed and replaced on every export
}

// Start starts a receiver on two loopback ports; it stops with the test.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tracingtest: listen: %v", err)
	}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, &grpcService{r: r})
	go func() { _ = gs.Serve(gl) }()
	t.Cleanup(gs.Stop)
	r.GRPCEndpoint = "http://" + gl.Addr().String()

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tracingtest: listen: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() { _ = hs.Close() })
	r.HTTPEndpoint = "http://" + hl.Addr().String()
	return r
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers returns the request headers (gRPC metadata or HTTP headers,
// keys in lower case) of every export so far.
func (r *Receiver) Headers() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]string(nil), r.headers...)
}

// Wait returns the spans once done(spans) holds, or ctx's error with the
// spans received by then. Exporters batch: a test waits for a condition,
// never for a time.
func (r *Receiver) Wait(ctx context.Context, done func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans, nil
		}
		select {
		case <-ctx.Done():
			return spans, fmt.Errorf("tracingtest: %d spans received, condition not met: %w", len(spans), ctx.Err())
		case <-changed:
		}
	}
}

func (r *Receiver) record(req *collectorpb.ExportTraceServiceRequest, protocol string, headers map[string]string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, flatten(s, service, protocol))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	r.headers = append(r.headers, headers)
	close(r.changed)
	r.changed = make(chan struct{})
}

func flatten(s *tracepb.Span, service, protocol string) Span {
	sp := Span{
		TraceID:       hex.EncodeToString(s.GetTraceId()),
		SpanID:        hex.EncodeToString(s.GetSpanId()),
		ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
		Name:          s.GetName(),
		Kind:          strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_"),
		Service:       service,
		Attributes:    attrs(s.GetAttributes()),
		StatusCode:    statusName(s.GetStatus().GetCode()),
		StatusMessage: s.GetStatus().GetMessage(),
		Start:         time.Unix(0, int64(s.GetStartTimeUnixNano())),
		End:           time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Protocol:      protocol,
	}
	for _, e := range s.GetEvents() {
		sp.Events = append(sp.Events, Event{Name: e.GetName(), Attributes: attrs(e.GetAttributes())})
	}
	return sp
}

func statusName(c tracepb.Status_StatusCode) string {
	switch c {
	case tracepb.Status_STATUS_CODE_OK:
		return "Ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		return "Error"
	}
	return "Unset"
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, value(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	}
	return ""
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g *grpcService) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	headers := map[string]string{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, v := range md {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	g.r.record(req, "grpc", headers)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// maxBody bounds one OTLP/HTTP request body.
const maxBody = 32 << 20

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "tracingtest: only application/x-protobuf bodies, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	headers := map[string]string{}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	r.record(&msg, "http", headers)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

// Trace returns the spans of one trace.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Named returns the spans called name, in start order.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Children returns the spans whose parent is parent, in start order.
func Children(spans []Span, parent Span) []Span {
	var out []Span
	for _, s := range spans {
		if s.ParentSpanID == parent.SpanID && s.TraceID == parent.TraceID {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}
