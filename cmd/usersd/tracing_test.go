package main

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: what a collector's otlp receiver does
// with POST /v1/traces, in protobuf or JSON, keeping the spans it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each batch's resource
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rec := &otlpReceiver{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unmarshal := proto.Unmarshal
		contentType := r.Header.Get("Content-Type")
		if contentType == "application/json" {
			unmarshal = protojson.Unmarshal
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || contentType != "application/json" && contentType != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces of application/x-protobuf or application/json", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		raw, err := io.ReadAll(body)
		var export collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = unmarshal(raw, &export)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec.mu.Lock()
		for _, resourceSpans := range export.GetResourceSpans() {
			for _, attr := range resourceSpans.GetResource().GetAttributes() {
				if attr.GetKey() == "service.name" {
					rec.services = append(rec.services, attr.GetValue().GetStringValue())
				}
			}
			for _, scopeSpans := range resourceSpans.GetScopeSpans() {
				for _, span := range scopeSpans.GetSpans() {
					if contentType == "application/json" {
						span.TraceId, span.SpanId, span.ParentSpanId = hexID(span.TraceId), hexID(span.SpanId), hexID(span.ParentSpanId)
					}
					rec.spans = append(rec.spans, span)
				}
			}
		}
		rec.mu.Unlock()
		answer, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		if contentType == "application/json" {
			answer, _ = protojson.Marshal(&collectortrace.ExportTraceServiceResponse{})
		}
		w.Header().Set("Content-Type", contentType)
		w.Write(answer)
	}))
	t.Cleanup(rec.Close)
	return rec
}

// hexID reads an id of OTLP/JSON, which writes ids in hex where proto3's JSON mapping (and so
// protojson, which decoded it) has base64: the bytes protojson made are the hex text's base64
// reading, so encoding them again gives the text back.
func hexID(decoded []byte) []byte {
	id, err := hex.DecodeString(base64.StdEncoding.EncodeToString(decoded))
	if err != nil {
		return decoded
	}
	return id
}

// waitForSpan waits until a span named name of trace traceID has been received, and returns it.
func (rec *otlpReceiver) waitForSpan(t *testing.T, traceID []byte, name string) *tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec.mu.Lock()
		i := slices.IndexFunc(rec.spans, func(s *tracepb.Span) bool {
			return s.GetName() == name && string(s.GetTraceId()) == string(traceID)
		})
		var span *tracepb.Span
		if i >= 0 {
			span = rec.spans[i]
		}
		var names []string
		for _, s := range rec.spans {
			names = append(names, fmt.Sprintf("%s (trace %x)", s.GetName(), s.GetTraceId()))
		}
		rec.mu.Unlock()
		if span != nil {
			return span
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q of trace %x within 15s; received: %v", name, traceID, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// attribute returns the string form of a span attribute's value, or "" without it.
func attribute(span *tracepb.Span, key string) string {
	for _, attr := range span.GetAttributes() {
		if attr.GetKey() == key {
			value := attr.GetValue()
			if _, ok := value.GetValue().(*commonpb.AnyValue_IntValue); ok {
				return fmt.Sprint(value.GetIntValue())
			}
			return value.GetStringValue()
		}
	}
	return ""
}

// callerSpan is a span of a caller's own: its trace and span ids, and the traceparent that
// carries them (sampled).
type callerSpan struct {
	traceID, spanID []byte
	traceparent     string
}

func newCallerSpan(t *testing.T) callerSpan {
	t.Helper()
	c := callerSpan{traceID: make([]byte, 16), spanID: make([]byte, 8)}
	rand.Read(c.traceID)
	rand.Read(c.spanID)
	c.traceparent = fmt.Sprintf("00-%x-%x-01", c.traceID, c.spanID)
	return c
}

// TestTracesReachAnOTLPReceiverWithTheCallersTraceID: with an OTLP endpoint set, a gRPC call and a
// REST call that carry a caller's traceparent each become a server span of the caller's trace, a
// child of the caller's span, with a span for the store call within it; so does a call over each
// other RPC protocol. The spans reach the receiver while the service runs, and the access log line
// of each request names its trace and span.
func TestTracesReachAnOTLPReceiverWithTheCallersTraceID(t *testing.T) {
	receiver := startOTLPReceiver(t)
	cmd, s, logs := startProcessWithEnv(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL,
		"OTEL_BSP_SCHEDULE_DELAY=100", // milliseconds: send each batch at once
	}, filepath.Join(t.TempDir(), "users.db"))
	id := apitest.IDOf(t, s.CreateUser(t, "ada", "admin"))

	grpcCaller := newCallerSpan(t)
	getUserAs(t, s, "gRPC", grpcCaller, id)
	restCaller := newCallerSpan(t)
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?role=admin",
		Header: map[string]string{"traceparent": restCaller.traceparent}}); res.Status != http.StatusOK {
		t.Fatalf("GET /users: %d %s", res.Status, res.Body)
	}

	serverSpans := map[string]*tracepb.Span{}
	for _, c := range []struct {
		caller            callerSpan
		server, storeCall string
		attributes        map[string]string
	}{
		{grpcCaller, "users.v1.Users/GetUser", "store.GetUser", map[string]string{
			"rpc.system.name": "grpc", "rpc.method": "users.v1.Users/GetUser", "rpc.response.status_code": "OK"}},
		{restCaller, "GET /users", "store.ListUsers", map[string]string{
			"http.request.method": "GET", "http.route": "/users", "http.response.status_code": "200"}},
	} {
		server := receiver.waitForSpan(t, c.caller.traceID, c.server)
		serverSpans[c.server] = server
		if string(server.GetParentSpanId()) != string(c.caller.spanID) {
			t.Errorf("%s: parent span %x, want the caller's %x", c.server, server.GetParentSpanId(), c.caller.spanID)
		}
		if server.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("%s: kind %v, want server", c.server, server.GetKind())
		}
		for key, want := range c.attributes {
			if got := attribute(server, key); got != want {
				t.Errorf("%s: %s = %q, want %q", c.server, key, got, want)
			}
		}
		storeCall := receiver.waitForSpan(t, c.caller.traceID, c.storeCall)
		if string(storeCall.GetParentSpanId()) != string(server.GetSpanId()) {
			t.Errorf("%s: parent span %x, want the request's %x", c.storeCall, storeCall.GetParentSpanId(), server.GetSpanId())
		}
		if got := attribute(storeCall, "db.system.name"); got != "sqlite" {
			t.Errorf("%s: db.system.name = %q, want sqlite", c.storeCall, got)
		}
	}
	// The other RPC protocols carry the traceparent as well. The user is in the cache by now, so
	// these calls make no store call.
	for protocol, system := range map[string]string{"Connect binary": "connectrpc", "Connect JSON": "connectrpc", "gRPC-Web": "grpc"} {
		caller := newCallerSpan(t)
		getUserAs(t, s, protocol, caller, id)
		server := receiver.waitForSpan(t, caller.traceID, "users.v1.Users/GetUser")
		if string(server.GetParentSpanId()) != string(caller.spanID) || attribute(server, "rpc.system.name") != system {
			t.Errorf("%s: parent span %x and rpc.system.name %q, want the caller's %x and %q", protocol,
				server.GetParentSpanId(), attribute(server, "rpc.system.name"), caller.spanID, system)
		}
	}
	receiver.mu.Lock()
	services := slices.Clone(receiver.services)
	receiver.mu.Unlock()
	if len(services) == 0 || slices.ContainsFunc(services, func(name string) bool { return name != "usersd" }) {
		t.Errorf("service.name of the batches: %v, want usersd", services)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("usersd did not stop cleanly: %v", err)
	}
	lines := <-logs
	for path, server := range map[string]*tracepb.Span{
		"/users.v1.Users/GetUser": serverSpans["users.v1.Users/GetUser"],
		"/users":                  serverSpans["GET /users"],
	} {
		traceID := hex.EncodeToString(server.GetTraceId())
		i := slices.IndexFunc(lines, func(l map[string]any) bool { return l["msg"] == "request" && l["trace_id"] == traceID })
		if i < 0 {
			t.Errorf("no access log line with the trace id %s of %s", traceID, path)
			continue
		}
		if line := lines[i]; line["path"] != path || line["span_id"] != hex.EncodeToString(server.GetSpanId()) {
			t.Errorf("the access log line of trace %s: path %v, span_id %v; want %s and %x", traceID, line["path"], line["span_id"],
				path, server.GetSpanId())
		}
	}
}

// TestSpansStillBufferedAreSentAtAStop: a clean stop sends the spans that the batcher still holds,
// here over OTLP's JSON encoding. The batch delay is ten minutes, so only the stop can send them.
func TestSpansStillBufferedAreSentAtAStop(t *testing.T) {
	receiver := startOTLPReceiver(t)
	cmd, s, _ := startProcessWithEnv(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/json",
		"OTEL_BSP_SCHEDULE_DELAY=600000",
	}, filepath.Join(t.TempDir(), "users.db"))
	caller := newCallerSpan(t)
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users",
		Header: map[string]string{"traceparent": caller.traceparent}}); res.Status != http.StatusOK {
		t.Fatalf("GET /users: %d %s", res.Status, res.Body)
	}
	time.Sleep(200 * time.Millisecond) // what a batch delay short enough to matter would have taken
	receiver.mu.Lock()
	early := len(receiver.spans)
	receiver.mu.Unlock()
	if early != 0 {
		t.Fatalf("%d spans arrived before the stop: the batch delay did not hold them", early)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("usersd did not stop cleanly: %v", err)
	}
	receiver.waitForSpan(t, caller.traceID, "GET /users")
}

// getUserAs calls GetUser over protocol with the caller's traceparent.
func getUserAs(t *testing.T, s *testServer, protocol string, caller callerSpan, id int) {
	t.Helper()
	client := s.RPCClient(apitest.RPCProtocolNamed(t, protocol), "", connect.WithInterceptors(connect.UnaryInterceptorFunc(
		func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("traceparent", caller.traceparent)
				return next(ctx, req)
			}
		})))
	if _, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: int32(id)}); err != nil {
		t.Fatalf("%s GetUser: %v", protocol, err)
	}
}

// TestWithoutAnExporterNothingIsTraced: tracing is off by default, so a caller's traceparent
// changes nothing, and no access log line carries a trace id.
func TestWithoutAnExporterNothingIsTraced(t *testing.T) {
	s := startServer(t)
	caller := newCallerSpan(t)
	s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users", Header: map[string]string{"traceparent": caller.traceparent}})
	for _, line := range s.logs.Entries(map[string]any{"msg": "request"}) {
		if _, ok := line["trace_id"]; ok {
			t.Errorf("a request was traced without an exporter: %v", line)
		}
	}
}

// TestTracingIsOnOnlyWhenAnExporterIsSet: the OTEL_* variables decide, as in every OpenTelemetry
// SDK; what this build cannot export is refused at start, not ignored.
func TestTracingIsOnOnlyWhenAnExporterIsSet(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		on      bool
		refused string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "usersd"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, refused: "OTLP over HTTP only"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, refused: "only with otlp"},
	} {
		on, err := tracingWanted(func(name string) string { return c.env[name] })
		switch {
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%v: error %v, want one saying %q", c.env, err, c.refused)
		case c.refused == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case on != c.on:
			t.Errorf("%v: tracing on = %v, want %v", c.env, on, c.on)
		}
	}
}
