package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// watchProtocol is a way to watch users: one of the RPC protocols, or Server-Sent Events over a
// client of the HTTP version it names.
type watchProtocol struct {
	name string
	rpc  *apitest.RPCProtocol
	sse  *http.Client
}

func watchProtocols() []watchProtocol {
	var out []watchProtocol
	for _, p := range apitest.RPCProtocols {
		out = append(out, watchProtocol{name: p.Name, rpc: &p})
	}
	return append(out, watchProtocol{name: "SSE over HTTP/1.1", sse: apitest.HTTP1Client}, watchProtocol{name: "SSE over h2c", sse: apitest.H2CClient})
}

// watchedEvent is one message of a watch, as the client read it; data is the SSE event's data.
type watchedEvent struct {
	*usersv1.UserEvent
	data string
}

// watchStream is an open watch that a goroutine reads into events; end receives how it ended.
type watchStream struct {
	events chan watchedEvent
	end    chan error
	cancel context.CancelFunc
}

// startWatch opens a watch with p and reads it in the background until it ends or the test does.
// after < 0 watches from now. It fails the test if the watch is refused: see openWatch.
func startWatch(t *testing.T, s *testServer, p watchProtocol, after int64, role string) *watchStream {
	t.Helper()
	w, err := openWatch(t, s, p, after, role)
	if err != nil {
		t.Fatalf("%s: watch after %d: %v", p.name, after, err)
	}
	return w
}

// openWatch opens a watch and waits for its first message, the heartbeat that says where it
// starts, or for the error that refused it: a *connect.Error on RPC, an sseRefusal on SSE.
func openWatch(t *testing.T, s *testServer, p watchProtocol, after int64, role string) (*watchStream, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &watchStream{events: make(chan watchedEvent, 10_000), end: make(chan error, 1), cancel: cancel}
	if p.rpc != nil {
		req := &usersv1.WatchUsersRequest{Role: role}
		if after >= 0 {
			req.AfterSequence = &after
		}
		stream, err := s.RPCClient(*p.rpc, "").WatchUsers(ctx, req)
		if err != nil {
			return nil, err
		}
		go func() {
			defer stream.Close()
			for stream.Receive() {
				w.events <- watchedEvent{UserEvent: stream.Msg()}
			}
			w.end <- stream.Err()
		}()
	} else {
		res, err := openEventStream(ctx, s, p.sse, after, role, nil)
		if err != nil {
			return nil, err
		}
		go func() {
			defer res.Body.Close()
			w.end <- readEventStream(res.Body, w.events)
		}()
	}
	select {
	case e := <-w.events:
		if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
			t.Fatalf("%s: the first message is %v, want a heartbeat", p.name, e.UserEvent)
		}
		return w, nil
	case err := <-w.end:
		return nil, err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no first heartbeat within 10s", p.name)
		return nil, nil
	}
}

// sseRefusal is the answer to a watch over REST that did not start a stream.
type sseRefusal struct {
	status int
	body   string
}

func (r sseRefusal) Error() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// openEventStream sends GET /users/events and returns the open stream, or the refusal.
func openEventStream(ctx context.Context, s *testServer, client *http.Client, after int64, role string, header http.Header) (*http.Response, error) {
	query := []string{}
	if role != "" {
		query = append(query, "role="+role)
	}
	if after >= 0 {
		query = append(query, "afterSequence="+strconv.FormatInt(after, 10))
	}
	req, err := http.NewRequestWithContext(ctx, "GET", s.BaseURL+"/users/events?"+strings.Join(query, "&"), nil)
	if err != nil {
		return nil, err
	}
	for name, values := range header {
		req.Header[name] = values
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return nil, sseRefusal{status: res.StatusCode, body: string(body)}
	}
	return res, nil
}

// readEventStream parses Server-Sent Events into events until the stream ends. An "error" event
// ends it with an sseError; each other event must have its sequence as its id and its kind as its
// name.
func readEventStream(body io.Reader, events chan<- watchedEvent) error {
	scanner := bufio.NewScanner(body)
	var id, name, data string
	for scanner.Scan() {
		line := scanner.Text()
		field, value, _ := strings.Cut(line, ": ")
		switch {
		case line == "":
			if name == "error" {
				return sseError(data)
			}
			e := &usersv1.UserEvent{}
			if err := protojson.Unmarshal([]byte(data), e); err != nil {
				return fmt.Errorf("event data %q: %w", data, err)
			}
			if id != strconv.FormatInt(e.GetSequence(), 10) || name != sseName(e.GetKind()) {
				return fmt.Errorf("event id %q and name %q for %s", id, name, data)
			}
			events <- watchedEvent{UserEvent: e, data: data}
			id, name, data = "", "", ""
		case field == "id":
			id = value
		case field == "event":
			name = value
		case field == "data":
			data = value
		default:
			return fmt.Errorf("unexpected line %q", line)
		}
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	return io.EOF
}

// sseError is the data of an "error" event.
type sseError string

func (e sseError) Error() string { return string(e) }

func sseName(k usersv1.UserEvent_Kind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "KIND_"))
}

// next returns the next message that is not a heartbeat, failing the test if none comes within d.
func (w *watchStream) next(t *testing.T, d time.Duration) watchedEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-w.events:
			if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
				return e
			}
		case err := <-w.end:
			t.Fatalf("the watch ended while a change was awaited: %v", err)
		case <-deadline:
			t.Fatalf("no change within %s", d)
		}
	}
}

// quiet fails the test if a change arrives within d.
func (w *watchStream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-w.events:
			if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
				t.Fatalf("unexpected change %v", e.UserEvent)
			}
		case err := <-w.end:
			t.Fatalf("the watch ended: %v", err)
		case <-deadline:
			return
		}
	}
}

// ended waits for the watch to end and returns how it did.
func (w *watchStream) ended(t *testing.T, d time.Duration) error {
	t.Helper()
	for {
		select {
		case <-w.events:
		case err := <-w.end:
			return err
		case <-time.After(d):
			t.Fatalf("the watch did not end within %s", d)
		}
	}
}

// wantWatchCode fails the test unless err is code on RPC or, on SSE, status (a refusal) or an error
// event (status 0).
func wantWatchCode(t *testing.T, p watchProtocol, err error, code connect.Code, status int) {
	t.Helper()
	if p.rpc != nil {
		apitest.RPCWantCode(t, err, code)
		return
	}
	var refusal sseRefusal
	var event sseError
	switch {
	case status != 0 && errors.As(err, &refusal) && refusal.status == status && strings.HasPrefix(refusal.body, `{"error":`):
	case status == 0 && errors.As(err, &event):
	default:
		t.Fatalf("%s: got %v, want status %d (0: an error event)", p.name, err, status)
	}
}
