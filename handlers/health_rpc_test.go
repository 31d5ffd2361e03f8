package handlers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"usersd/internal/apitest"
	"usersd/store/observed"
	"usersd/store/sqlstore"
)

// gRPC health's Watch streams the serving status on every protocol: SERVING at once, NOT_SERVING
// as soon as draining starts, and the end of the stream with unavailable when the watches end, so
// that the client watches another replica.
func TestRPCHealthWatchStreamsTheStatus(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](apitest.H2CClient,
				s.BaseURL+"/grpc.health.v1.Health/Watch", p.Opts...)
			stream, err := watch.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: "users.v1.Users"}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			next := func(want healthpb.HealthCheckResponse_ServingStatus) {
				t.Helper()
				if !stream.Receive() || stream.Msg().GetStatus() != want {
					t.Fatalf("got %v (%v), want %v", stream.Msg().GetStatus(), stream.Err(), want)
				}
			}
			next(healthpb.HealthCheckResponse_SERVING)
			s.service.Drain()
			next(healthpb.HealthCheckResponse_NOT_SERVING)
			s.service.EndWatches()
			if stream.Receive() || connect.CodeOf(stream.Err()) != connect.CodeUnavailable {
				t.Fatalf("after EndWatches: %v, want the stream ended with unavailable", stream.Err())
			}
		})
	}
	t.Run("an unknown service is SERVICE_UNKNOWN", func(t *testing.T) {
		s := startServer(t)
		watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](apitest.H2CClient, s.BaseURL+"/grpc.health.v1.Health/Watch", connect.WithGRPC())
		stream, err := watch.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: "nope"}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		if !stream.Receive() || stream.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
			t.Fatalf("got %v (%v), want SERVICE_UNKNOWN", stream.Msg().GetStatus(), stream.Err())
		}
	})
}

// List answers the status of the process and of every service it serves.
func TestRPCHealthListAnswersEveryService(t *testing.T) {
	s := startServer(t)
	list := connect.NewClient[healthpb.HealthListRequest, healthpb.HealthListResponse](apitest.H2CClient, s.BaseURL+"/grpc.health.v1.Health/List", connect.WithGRPC())
	res, err := list.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	statuses := res.Msg.GetStatuses()
	if len(statuses) != 2 || statuses[""].GetStatus() != healthpb.HealthCheckResponse_SERVING || statuses["users.v1.Users"].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("List answered %v, want \"\" and users.v1.Users SERVING", statuses)
	}
}

// TestRPCReflectionListsExactlyWhatIsServed: every service that reflection lists answers each of
// its methods, and every service of this binary that answers a method is listed. A method counts
// as served when a gRPC call of it gets anything but unimplemented: the gRPC protocol asks the
// same of unary and streaming methods, and a streaming one that is served answers its headers.
func TestRPCReflectionListsExactlyWhatIsServed(t *testing.T) {
	s := startServer(t)
	stream := grpcreflect.NewClient(apitest.H2CClient, s.BaseURL).NewStream(t.Context())
	t.Cleanup(func() { _, _ = stream.Close() })
	listed, err := stream.ListServices()
	apitest.RPCMust(t, "ListServices", err)
	isListed := map[protoreflect.FullName]bool{}
	for _, name := range listed {
		isListed[name] = true
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(name); err != nil {
			t.Errorf("reflection lists %s, which this binary does not know: %v", name, err)
		}
	}
	protoregistry.GlobalFiles.RangeFiles(func(file protoreflect.FileDescriptor) bool {
		for i := range file.Services().Len() {
			service := file.Services().Get(i)
			methods := service.Methods()
			for j := range methods.Len() {
				path := "/" + string(service.FullName()) + "/" + string(methods.Get(j).Name())
				served := grpcMethodServed(t, s.BaseURL+path)
				switch {
				case isListed[service.FullName()] && !served:
					t.Errorf("reflection lists %s, which answers unimplemented", path)
				case !isListed[service.FullName()] && served:
					t.Errorf("%s is served, but reflection does not list %s", path, service.FullName())
				}
			}
		}
		return true
	})
}

// grpcMethodServed calls the method at url over gRPC (h2c) with one empty message, and reports
// whether the answer is anything but unimplemented (grpc-status 12).
func grpcMethodServed(t *testing.T, url string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(make([]byte, 5))) // an empty message, uncompressed
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc+proto")
	req.Header.Set("TE", "trailers")
	res, err := apitest.H2CClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s over gRPC: %v", url, err)
	}
	defer res.Body.Close()
	if status := res.Header.Get("Grpc-Status"); status != "" { // a trailers-only answer
		return status != "12"
	}
	if res.StatusCode != http.StatusOK {
		return res.StatusCode != http.StatusNotFound
	}
	// A stream that is served may go on: its headers say enough. A unary answer ends with its
	// status in the trailers.
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, res.Body); close(done) }()
	select {
	case <-done:
		return res.Trailer.Get("Grpc-Status") != "12"
	case <-time.After(time.Second):
		return true
	}
}

// A procedure that no service serves is answered 404 over Connect, as the protocol says, and
// unimplemented over gRPC and gRPC-Web.
func TestRPCUnknownProcedure(t *testing.T) {
	s := startServer(t)
	res := s.Do(t, apitest.H2CClient, request{Method: "POST", Path: "/users.v1.Users/Nope", Header: apitest.JSONBody, Body: "{}"})
	if code := rpcConnectErrorCode(t, res.Body); res.Status != http.StatusNotFound || code != "unimplemented" {
		t.Fatalf("Connect: %d %s, want 404 unimplemented", res.Status, res.Body)
	}
	for _, p := range apitest.RPCProtocols {
		nope := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](apitest.H2CClient, s.BaseURL+"/users.v1.Users/Nope", p.Opts...)
		_, err := nope.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeUnimplemented {
			t.Errorf("%s: %v, want unimplemented", p.Name, err)
		}
	}
}

// TestHealthWatchesShareOnePing: a health watch is public and lasts, so the store must not be asked
// once per watch: fifty watches opened together get the answer of one ping.
func TestHealthWatchesShareOnePing(t *testing.T) {
	st, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	registry := prometheus.NewRegistry()
	counted, err := observed.New(st, observed.Options{Metrics: registry, System: "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, Config{Store: counted})
	pings := func() uint64 {
		families, err := registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if f.GetName() == "usersd_store_operation_duration_seconds" && l.GetName() == "operation" && l.GetValue() == "Ping" {
						return m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		return 0
	}
	before := pings()
	watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](apitest.H2CClient,
		s.BaseURL+"/grpc.health.v1.Health/Watch", connect.WithGRPC())
	const watches = 50
	for range watches {
		stream, err := watch.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		if !stream.Receive() || stream.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("got %v (%v), want SERVING", stream.Msg().GetStatus(), stream.Err())
		}
	}
	// One ping a poll period; a machine slow enough to open the fifty across a few periods makes
	// a few.
	if n := pings() - before; n > watches/10 {
		t.Fatalf("%d watches pinged the store %d times, want about once for them all", watches, n)
	}
}
