// Watching users over every way in: the four RPC protocols and Server-Sent Events over HTTP/1.1 and
// h2c, read by one client that tells a refusal from an error event.
package apitest

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
)

// WatchProtocol is a way to watch users: one of the RPC protocols, or Server-Sent Events over a
// client of the HTTP version it names.
type WatchProtocol struct {
	Name string
	RPC  *RPCProtocol
	SSE  *http.Client
}

func WatchProtocols() []WatchProtocol {
	var out []WatchProtocol
	for _, p := range RPCProtocols {
		out = append(out, WatchProtocol{Name: p.Name, RPC: &p})
	}
	return append(out, WatchProtocol{Name: "SSE over HTTP/1.1", SSE: HTTP1Client}, WatchProtocol{Name: "SSE over h2c", SSE: H2CClient})
}

// WatchedEvent is one message of a watch, as the client read it; data is the SSE event's data.
type WatchedEvent struct {
	*usersv1.UserEvent
	Data string
}

// WatchStream is an open watch that a goroutine reads into events; end receives how it ended.
type WatchStream struct {
	Events chan WatchedEvent
	End    chan error
	Cancel context.CancelFunc
}

// StartWatch opens a watch with p and reads it in the background until it ends or the test does.
// after < 0 watches from now. It fails the test if the watch is refused: see openWatch.
func StartWatch(t *testing.T, s Server, p WatchProtocol, after int64, role string) *WatchStream {
	t.Helper()
	w, err := OpenWatch(t, s, p, after, role)
	if err != nil {
		t.Fatalf("%s: watch after %d: %v", p.Name, after, err)
	}
	return w
}

// OpenWatch opens a watch and waits for its first message, the heartbeat that says where it
// starts, or for the error that refused it: a *connect.Error on RPC, an sseRefusal on SSE.
func OpenWatch(t *testing.T, s Server, p WatchProtocol, after int64, role string) (*WatchStream, error) {
	t.Helper()
	return OpenWatchWithKey(t, s, p, "", after, role)
}

// OpenWatchWithKey is OpenWatch with key in x-api-key, unless it is "".
func OpenWatchWithKey(t *testing.T, s Server, p WatchProtocol, key string, after int64, role string) (*WatchStream, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &WatchStream{Events: make(chan WatchedEvent, 10_000), End: make(chan error, 1), Cancel: cancel}
	if p.RPC != nil {
		req := &usersv1.WatchUsersRequest{Role: role}
		if after >= 0 {
			req.AfterSequence = &after
		}
		stream, err := s.RPCClient(*p.RPC, key).WatchUsers(ctx, req)
		if err != nil {
			return nil, err
		}
		go func() {
			defer stream.Close()
			for stream.Receive() {
				w.Events <- WatchedEvent{UserEvent: stream.Msg()}
			}
			w.End <- stream.Err()
		}()
	} else {
		var header http.Header
		if key != "" {
			header = http.Header{"X-Api-Key": {key}}
		}
		res, err := OpenEventStream(ctx, s, p.SSE, after, role, header)
		if err != nil {
			return nil, err
		}
		go func() {
			defer res.Body.Close()
			w.End <- ReadEventStream(res.Body, w.Events)
		}()
	}
	select {
	case e := <-w.Events:
		if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
			t.Fatalf("%s: the first message is %v, want a heartbeat", p.Name, e.UserEvent)
		}
		return w, nil
	case err := <-w.End:
		return nil, err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no first heartbeat within 10s", p.Name)
		return nil, nil
	}
}

// SSERefusal is the answer to a watch over REST that did not start a stream.
type SSERefusal struct {
	Status int
	Body   string
}

func (r SSERefusal) Error() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// OpenEventStream sends GET /users/events and returns the open stream, or the refusal.
func OpenEventStream(ctx context.Context, s Server, client *http.Client, after int64, role string, header http.Header) (*http.Response, error) {
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
		return nil, SSERefusal{Status: res.StatusCode, Body: string(body)}
	}
	return res, nil
}

// ReadEventStream parses Server-Sent Events into events until the stream ends. An "error" event
// ends it with an sseError; each other event must have its sequence as its id and its kind as its
// name.
func ReadEventStream(body io.Reader, events chan<- WatchedEvent) error {
	scanner := bufio.NewScanner(body)
	var id, name, data string
	for scanner.Scan() {
		line := scanner.Text()
		field, value, _ := strings.Cut(line, ": ")
		switch {
		case line == "":
			if name == "error" {
				return SSEError(data)
			}
			e := &usersv1.UserEvent{}
			if err := protojson.Unmarshal([]byte(data), e); err != nil {
				return fmt.Errorf("event data %q: %w", data, err)
			}
			if id != strconv.FormatInt(e.GetSequence(), 10) || name != SSEName(e.GetKind()) {
				return fmt.Errorf("event id %q and name %q for %s", id, name, data)
			}
			events <- WatchedEvent{UserEvent: e, Data: data}
			id, name, data = "", "", ""
		case field == "id":
			id = value
		case field == "event":
			name = value
		case field == "data":
			data = value
		case field == "retry": // the reconnection delay of an EventSource, in milliseconds
			if ms, err := strconv.Atoi(value); err != nil || ms <= 0 {
				return fmt.Errorf("retry %q is not a number of milliseconds", value)
			}
		default:
			return fmt.Errorf("unexpected line %q", line)
		}
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	return io.EOF
}

// SSEError is the data of an "error" event.
type SSEError string

func (e SSEError) Error() string { return string(e) }

// SSEName is the SSE event name of a kind of change.
func SSEName(k usersv1.UserEvent_Kind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "KIND_"))
}

// Next returns the Next message that is not a heartbeat, failing the test if none comes within d.
func (w *WatchStream) Next(t *testing.T, d time.Duration) WatchedEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-w.Events:
			if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
				return e
			}
		case err := <-w.End:
			t.Fatalf("the watch ended while a change was awaited: %v", err)
		case <-deadline:
			t.Fatalf("no change within %s", d)
		}
	}
}

// Quiet fails the test if a change arrives within d.
func (w *WatchStream) Quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-w.Events:
			if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
				t.Fatalf("unexpected change %v", e.UserEvent)
			}
		case err := <-w.End:
			t.Fatalf("the watch ended: %v", err)
		case <-deadline:
			return
		}
	}
}

// Ended waits for the watch to end and returns how it did.
func (w *WatchStream) Ended(t *testing.T, d time.Duration) error {
	t.Helper()
	for {
		select {
		case <-w.Events:
		case err := <-w.End:
			return err
		case <-time.After(d):
			t.Fatalf("the watch did not end within %s", d)
		}
	}
}

// WantWatchCode fails the test unless err is code on RPC or, on SSE, status (a refusal) or an error
// event (status 0).
func WantWatchCode(t *testing.T, p WatchProtocol, err error, code connect.Code, status int) {
	t.Helper()
	if p.RPC != nil {
		RPCWantCode(t, err, code)
		return
	}
	var refusal SSERefusal
	var event SSEError
	switch {
	case status != 0 && errors.As(err, &refusal) && refusal.Status == status && strings.HasPrefix(refusal.Body, `{"error":`):
	case status == 0 && errors.As(err, &event):
	default:
		t.Fatalf("%s: got %v, want status %d (0: an error event)", p.Name, err, status)
	}
}

// Change is what a test expects of one change: its kind and its user's id and name ("" for a
// delete, which carries the id alone).
type Change struct {
	Kind usersv1.UserEvent_Kind
	ID   int32
	Name string
}

// WantChanges reads the next changes (heartbeats skipped) and fails the test unless they are want,
// in order, with growing sequences.
func (w *WatchStream) WantChanges(t *testing.T, want ...Change) []WatchedEvent {
	t.Helper()
	var got []WatchedEvent
	for i, c := range want {
		e := w.Next(t, 5*time.Second)
		got = append(got, e)
		if e.GetKind() != c.Kind || e.GetUser().GetId() != c.ID || e.GetUser().GetName() != c.Name {
			t.Fatalf("change %d: %v, want %v", i, e.UserEvent, c)
		}
		if i > 0 && e.GetSequence() <= got[i-1].GetSequence() {
			t.Fatalf("change %d has sequence %d after %d", i, e.GetSequence(), got[i-1].GetSequence())
		}
	}
	return got
}

// UserID is the id of a user as JSON decoded it.
func UserID(t *testing.T, user map[string]any) int32 {
	t.Helper()
	return int32(IDOf(t, user))
}

// PatchName renames user id over REST.
func (s Server) PatchName(t *testing.T, id int32, name string) {
	t.Helper()
	res := s.Do(t, HTTP1Client, Request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", id), Key: true,
		Header: map[string]string{"Content-Type": "application/merge-patch+json"}, Body: fmt.Sprintf(`{"name":%q}`, name)})
	if res.Status != http.StatusOK {
		t.Fatalf("patch user %d: %d %s", id, res.Status, res.Body)
	}
}

// DeleteUser deletes user id over REST.
func (s Server) DeleteUser(t *testing.T, id int32) {
	t.Helper()
	if res := s.Do(t, HTTP1Client, Request{Method: "DELETE", Path: fmt.Sprintf("/users/%d", id), Key: true}); res.Status != http.StatusNoContent {
		t.Fatalf("delete user %d: %d %s", id, res.Status, res.Body)
	}
}
