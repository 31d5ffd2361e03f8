package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	usersv1 "usersd/gen/users/v1"
)

// webhookSettle is the least pause between making the subscriptions and the first write. usersd
// takes up a subscription made through it at once, but another replica, and a build before
// commit aa96607, at its engine's next lease round (every 3 s): a write before that waits for the round,
// which then is what a run measures, not the deliveries.
const webhookSettle = 4 * time.Second

// openHooks makes n webhook subscriptions of the server at baseURL, each to its own path of a
// receiver that watchload serves on loopback, and returns them as watchers: each delivery is
// handled as the event of a watch stream is, so the same checks (every acknowledged create once,
// in sequence order) and the same latencies apply. The server must allow loopback http receivers
// (-webhooks-allow-http and -webhooks-allow-private). A delivery that comes while another of the same subscription is under
// way breaks the one-at-a-time rule and is counted in overlapping.
func openHooks(ctx context.Context, baseURL, key string, n int, acks, seqs *[]atomic.Int64, writes int, overlapping *atomic.Int64) (*watchers, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ws := &watchers{}
	locks := make([]sync.Mutex, n)
	busy := make([]atomic.Bool, n)
	for range n {
		ws.list = append(ws.list, newWatcher(acks, seqs, writes))
	}
	receiver := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		k, err := strconv.Atoi(r.PathValue("k"))
		if err != nil || k < 0 || k >= n {
			http.NotFound(w, r)
			return
		}
		if !busy[k].CompareAndSwap(false, true) {
			overlapping.Add(1)
		} else {
			defer busy[k].Store(false)
		}
		ev, err := eventOf(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		locks[k].Lock()
		ws.list[k].handle(ev, now)
		locks[k].Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	mux := http.NewServeMux()
	mux.Handle("POST /hook/{k}", receiver.Handler)
	receiver.Handler = mux
	go receiver.Serve(l)
	ws.cancel = func() { receiver.Close() }

	client := &http.Client{Timeout: 10 * time.Second}
	for k := range n {
		body := fmt.Sprintf(`{"url":"http://%s/hook/%d"}`, l.Addr(), k)
		req, err := http.NewRequestWithContext(ctx, "POST", baseURL+"/webhooks", bytes.NewBufferString(body))
		if err != nil {
			ws.close()
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", key)
		res, err := client.Do(req)
		if err != nil {
			ws.close()
			return nil, fmt.Errorf("subscription %d: %w", k, err)
		}
		answer, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			ws.close()
			return nil, fmt.Errorf("subscription %d: %d %s", k, res.StatusCode, answer)
		}
	}
	return ws, nil
}

// eventOf reads a delivery's CloudEvent as the UserEvent a watch stream would have carried: its
// sequence (the event's id), kind and user name.
func eventOf(r *http.Request) (*usersv1.UserEvent, error) {
	var event struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&event); err != nil {
		return nil, fmt.Errorf("a delivery that is not a JSON event: %w", err)
	}
	seq, err := strconv.ParseInt(event.ID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("an event id that is not a sequence: %q", event.ID)
	}
	ev := &usersv1.UserEvent{Sequence: seq, User: &usersv1.User{Name: event.Data.Name}}
	if event.Type == "dev.usersd.user.created" {
		ev.Kind = usersv1.UserEvent_KIND_CREATED
	}
	return ev, nil
}
