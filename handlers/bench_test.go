package handlers

// Benchmarks of the request path in-process: the whole handler (middleware, mux, REST adapter or
// connect-go, the Users implementation, the JSON codec) on an in-memory store, so that they measure
// the service's own code and not SQLite (store/sqlstore has benchmarks of its own). Compare before
// and after a change with benchstat; see docs/PERFORMANCE.md.
//
//	go test ./handlers -run '^$' -bench . -benchmem -count 10 > old.txt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/codec"
	"usersd/store"
	"usersd/store/observed"
	"usersd/users"
)

const (
	benchUsers  = 1000
	benchAPIKey = "bench-key"
)

// benchStore keeps users in memory. It implements what the benchmarked routes call; the embedded
// nil store.Store makes any other method panic, which a benchmark would show at once.
type benchStore struct {
	store.Store
	mu     sync.Mutex
	users  map[int32]store.User
	newest []store.User // the first page of sort=-createdAt
	nextID int32
}

func newBenchStore() *benchStore {
	s := &benchStore{users: make(map[int32]store.User, benchUsers), nextID: benchUsers + 1}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	roles := []string{"admin", "editor", "viewer", ""}
	for i := int32(1); i <= benchUsers; i++ {
		created := start.Add(time.Duration(i) * 30 * time.Second)
		s.users[i] = store.User{ID: i, Name: fmt.Sprintf("Bench User %d", i), Role: roles[i%4], CreatedAt: created, UpdatedAt: created, Version: 1}
	}
	for i := int32(benchUsers); i > benchUsers-20; i-- {
		s.newest = append(s.newest, s.users[i])
	}
	return s
}

func (s *benchStore) GetUser(_ context.Context, id int32) (store.User, error) {
	u, ok := s.users[id]
	if !ok {
		return store.User{}, fmt.Errorf("user %d %w", id, store.ErrNotFound)
	}
	return u, nil
}

// Position is 0, as for a store without standbys (store.Store's Position).
func (s *benchStore) Position(context.Context) (store.Position, error) { return 0, nil }

func (s *benchStore) ListUsers(_ context.Context, _ store.UserQuery) (store.Page[store.User], error) {
	return store.Page[store.User]{Items: s.newest, Total: benchUsers}, nil
}

func (s *benchStore) CreateUser(_ context.Context, nu store.NewUser, _ *store.Completion[store.User]) (store.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	now := time.Now().UTC().Truncate(time.Microsecond)
	return store.User{ID: s.nextID, Name: nu.Name, Role: nu.Role, CreatedAt: now, UpdatedAt: now, Version: 1}, nil
}

// newBenchHandler is the service's whole handler on a benchStore, logging (access log included) as
// JSON to nowhere, so that formatting the log lines is measured but writing them is not. As in the
// service, requests and store calls are recorded in metrics; tracing is off, its default.
func newBenchHandler(b *testing.B) http.Handler {
	b.Helper()
	registry := prometheus.NewRegistry()
	observedStore, err := observed.New(newBenchStore(), observed.Options{Metrics: registry, System: "memory"})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{
		Store:     observedStore,
		Keys:      testKeys(benchAPIKey),
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, nil)),
		AccessLog: io.Discard,
		Metrics:   registry,
	})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// benchRequests makes a request for each target once, before the timed loop, so that parsing
// them is not measured; benchServe sends a copy of one.
func benchRequests(b *testing.B, method string, header http.Header, targets func(id int) (target, body string)) []*http.Request {
	b.Helper()
	reqs := make([]*http.Request, benchUsers+1)
	for id := 1; id <= benchUsers; id++ {
		target, body := targets(id)
		reqs[id] = httptest.NewRequest(method, target, strings.NewReader(body))
		reqs[id].Header = header.Clone()
		reqs[id].ContentLength = int64(len(body))
	}
	return reqs
}

// benchCopy is a copy of req with its own header map and body (none if body is nil).
func benchCopy(req *http.Request, body []byte) *http.Request {
	r := *req
	r.Header = req.Header.Clone()
	r.Body = http.NoBody
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return &r
}

// benchServe sends a copy of req through h, with its own header map and a fresh body, and fails
// the benchmark on an unexpected status. The copy and the recorder are part of every iteration.
func benchServe(b *testing.B, h http.Handler, req *http.Request, body []byte, want int) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, benchCopy(req, body))
	if rec.Code != want {
		b.Fatalf("status %d, want %d: %s", rec.Code, want, rec.Body)
	}
	return rec
}

// BenchmarkRESTGetUser is GET /users/{id}: the REST adapter, from the first middleware to the
// encoded user.
func BenchmarkRESTGetUser(b *testing.B) {
	h := newBenchHandler(b)
	reqs := benchRequests(b, http.MethodGet, http.Header{}, func(id int) (string, string) {
		return fmt.Sprintf("/users/%d", id), ""
	})
	id := 0
	b.ReportAllocs()
	for b.Loop() {
		id = id%benchUsers + 1
		benchServe(b, h, reqs[id], nil, http.StatusOK)
	}
}

// BenchmarkRESTListUsers is the first page of GET /users?sort=-createdAt: query parsing, paging
// headers and 20 users encoded.
func BenchmarkRESTListUsers(b *testing.B) {
	h := newBenchHandler(b)
	req := httptest.NewRequest(http.MethodGet, "/users?sort=-createdAt&limit=20", nil)
	b.ReportAllocs()
	for b.Loop() {
		benchServe(b, h, req, nil, http.StatusOK)
	}
}

// BenchmarkRESTCreateUser is POST /users with the key: the key check, the strict JSON decode,
// validation and the encoded answer (the store is in memory: no disk write is measured).
func BenchmarkRESTCreateUser(b *testing.B) {
	h := newBenchHandler(b)
	body := []byte(`{"name":"Bench User","role":"viewer"}`)
	req := httptest.NewRequest(http.MethodPost, "/users", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(APIKeyHeader, benchAPIKey)
	b.ReportAllocs()
	for b.Loop() {
		benchServe(b, h, req, body, http.StatusCreated)
	}
}

// BenchmarkConnectGetUser is the GetUser RPC over the Connect protocol with JSON, as curl or a
// browser sends it: connect-go's handler and the service's JSON codec.
func BenchmarkConnectGetUser(b *testing.B) {
	h := newBenchHandler(b)
	bodies := make([][]byte, benchUsers+1)
	reqs := benchRequests(b, http.MethodPost, http.Header{"Content-Type": {"application/json"}}, func(id int) (string, string) {
		bodies[id] = fmt.Appendf(nil, `{"id":%d}`, id)
		return "/users.v1.Users/GetUser", string(bodies[id])
	})
	id := 0
	b.ReportAllocs()
	for b.Loop() {
		id = id%benchUsers + 1
		benchServe(b, h, reqs[id], bodies[id], http.StatusOK)
	}
}

// BenchmarkGRPCGetUser is the GetUser RPC over gRPC with binary protobuf. The request claims
// HTTP/2, as gRPC requires; no real connection is involved.
func BenchmarkGRPCGetUser(b *testing.B) {
	h := newBenchHandler(b)
	frames := make([][]byte, benchUsers+1)
	reqs := benchRequests(b, http.MethodPost, http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}}, func(id int) (string, string) {
		msg, err := proto.Marshal(&usersv1.GetUserRequest{Id: int32(id)})
		if err != nil {
			b.Fatal(err)
		}
		frames[id] = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
		return "/users.v1.Users/GetUser", string(frames[id])
	})
	for _, r := range reqs[1:] {
		r.ProtoMajor, r.ProtoMinor, r.Proto = 2, 0, "HTTP/2.0"
	}
	// gRPC answers 200 whatever happened; the outcome is in the trailers. Check them once.
	if status := benchServe(b, h, reqs[42], frames[42], http.StatusOK).Result().Trailer.Get("Grpc-Status"); status != "0" {
		b.Fatalf("grpc-status %q, want 0", status)
	}
	id := 0
	b.ReportAllocs()
	for b.Loop() {
		id = id%benchUsers + 1
		benchServe(b, h, reqs[id], frames[id], http.StatusOK)
	}
}

func benchUser() *usersv1.User {
	u := newBenchStore().users[42]
	return &usersv1.User{Id: u.ID, Name: u.Name, Role: u.Role, CreatedAt: timestamppb.New(u.CreatedAt),
		UpdatedAt: timestamppb.New(u.UpdatedAt), Etag: users.ETag(u)}
}

// BenchmarkProtojsonMarshalUser is protojson alone on one user: the floor of the JSON codec.
func BenchmarkProtojsonMarshalUser(b *testing.B) {
	u := benchUser()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protojson.Marshal(u); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodecMarshalUser is the service's JSON codec on one user: protojson, then compacted.
// REST and Connect JSON both encode with it.
func BenchmarkCodecMarshalUser(b *testing.B) {
	u := benchUser()
	jsonCodec := codec.All[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonCodec.Marshal(u); err != nil {
			b.Fatal(err)
		}
	}
}
