package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
)

// h2cClient is an HTTP client of its own, so of its own HTTP/2 connection: h2c with prior
// knowledge, as gRPC clients speak to usersd without TLS.
func h2cClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &protocols}}
}

// usersClient is the generated client speaking gRPC over hc, sending key (if any) on every unary
// call.
func usersClient(hc *http.Client, baseURL, key string) usersv1connect.UsersClient {
	opts := []connect.ClientOption{connect.WithGRPC()}
	if key != "" {
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("x-api-key", key)
				return next(ctx, req)
			}
		})))
	}
	return usersv1connect.NewUsersClient(hc, baseURL, opts...)
}

// writeName is the name of write i, sent at sent: the watchers read both back from the event.
func writeName(i int, sent time.Time) string {
	return "watchload " + strconv.Itoa(i) + " " + strconv.FormatInt(sent.UnixNano(), 10)
}

func parseName(name string) (i int, sentNanos int64, ok bool) {
	rest, ok := strings.CutPrefix(name, "watchload ")
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(rest, " ")
	if !ok {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	sentNanos, err2 := strconv.ParseInt(b, 10, 64)
	return i, sentNanos, err1 == nil && err2 == nil
}

// watcher is one WatchUsers stream and what it received. Only its own goroutine writes it until
// the phase ends, except received, which the phase polls.
type watcher struct {
	acks *[]atomic.Int64 // when each write was acknowledged (Unix ns), 0 until it was
	seqs *[]atomic.Int64 // each write's sequence, as the first watcher to receive it saw it
	conn int             // which of the HTTP/2 connections it streams on

	seen                 []uint64 // a bit for each write index received
	received             atomic.Int64
	fromSend, fromAck    hist
	early                int64 // events received before their write's answer reached the writer
	duplicates           int64 // a write's event received again
	outOfOrder           int64 // a sequence not above the one before (a heartbeat's may equal it)
	foreign              int64 // events of writes that watchload did not make
	heartbeats           int64 // after the first
	firstNotHeartbeat    bool
	lastSequence         int64
	lastReceived         int64 // Unix ns
	err                  error // why the server ended the stream, if it did before the phase ended it
	endedAt              time.Time
	ended                atomic.Bool
	startErr             error
	firstHeartbeatWaited time.Duration
}

func newWatcher(acks, seqs *[]atomic.Int64, writes int) *watcher {
	return &watcher{acks: acks, seqs: seqs, seen: make([]uint64, (writes+63)/64)}
}

// run opens the stream and reads it until ctx ends or the server ends it. ready is called once,
// when the first message (the heartbeat) has come or the stream failed before it.
func (w *watcher) run(ctx context.Context, client usersv1connect.UsersClient, ready func()) {
	defer w.ended.Store(true)
	opened := time.Now()
	stream, err := client.WatchUsers(ctx, &usersv1.WatchUsersRequest{})
	if err != nil {
		w.startErr = err
		ready()
		return
	}
	defer stream.Close()
	first := true
	for stream.Receive() {
		now := time.Now().UnixNano()
		ev := stream.Msg()
		if first {
			first = false
			w.firstHeartbeatWaited = time.Since(opened)
			w.lastSequence = ev.GetSequence()
			ready()
			if ev.GetKind() == usersv1.UserEvent_KIND_HEARTBEAT {
				continue
			}
			w.firstNotHeartbeat = true
		}
		w.handle(ev, now)
	}
	err = stream.Err()
	if first {
		w.startErr = cmpErr(err, errors.New("the stream ended before its first message"))
		ready()
		return
	}
	if ctx.Err() == nil {
		w.err = cmpErr(err, errors.New("the server ended the stream without an error"))
		w.endedAt = time.Now()
	}
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func (w *watcher) handle(ev *usersv1.UserEvent, now int64) {
	seq := ev.GetSequence()
	if ev.GetKind() == usersv1.UserEvent_KIND_HEARTBEAT {
		w.heartbeats++
		if seq < w.lastSequence {
			w.outOfOrder++
		}
		w.lastSequence = max(w.lastSequence, seq)
		return
	}
	if seq <= w.lastSequence {
		w.outOfOrder++
	}
	w.lastSequence = max(w.lastSequence, seq)
	i, sent, ok := parseName(ev.GetUser().GetName())
	if ev.GetKind() != usersv1.UserEvent_KIND_CREATED || !ok || i < 0 || i >= len(*w.acks) {
		w.foreign++
		return
	}
	if w.seen[i/64]&(1<<(i%64)) != 0 {
		w.duplicates++
		return
	}
	w.seen[i/64] |= 1 << (i % 64)
	if s := &(*w.seqs)[i]; s.Load() == 0 {
		s.CompareAndSwap(0, seq)
	}
	w.received.Add(1)
	w.lastReceived = now
	w.fromSend.add(time.Duration(now - sent))
	if ack := (*w.acks)[i].Load(); ack == 0 || ack > now {
		w.early++
		w.fromAck.add(0)
	} else {
		w.fromAck.add(time.Duration(now - ack))
	}
}

// watchers is every watcher of a phase and the HTTP clients they share.
type watchers struct {
	list    []*watcher
	clients []*http.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// openWatchers opens n watches, perConn of them on each HTTP/2 connection, and waits until each has
// had its first message. The first watch of each connection opens alone, so that the connection is
// there before the others share it; then at most 100 open at a time.
func openWatchers(ctx context.Context, baseURL string, n, perConn int, acks, seqs *[]atomic.Int64, writes int) (*watchers, error) {
	ctx, cancel := context.WithCancel(ctx)
	ws := &watchers{cancel: cancel}
	var client usersv1connect.UsersClient
	opening := make(chan struct{}, 100)
	var ready sync.WaitGroup
	for i := range n {
		if i%perConn == 0 {
			hc := h2cClient()
			ws.clients = append(ws.clients, hc)
			client = usersClient(hc, baseURL, "")
		}
		w := newWatcher(acks, seqs, writes)
		w.conn = len(ws.clients) - 1
		ws.list = append(ws.list, w)
		opening <- struct{}{}
		ready.Add(1)
		ws.wg.Add(1)
		first := make(chan struct{})
		go func(client usersv1connect.UsersClient) {
			defer ws.wg.Done()
			w.run(ctx, client, func() { <-opening; ready.Done(); close(first) })
		}(client)
		if i%perConn == 0 {
			<-first
		}
	}
	ready.Wait()
	var errs []error
	for i, w := range ws.list {
		if w.startErr != nil {
			errs = append(errs, fmt.Errorf("watcher %d: %w", i, w.startErr))
		}
	}
	if len(errs) > 0 {
		ws.close()
		return nil, fmt.Errorf("%d of %d watches failed to start; the first: %w", len(errs), n, errs[0])
	}
	return ws, nil
}

// behind is how many watchers still streaming have received fewer than want writes.
func (ws *watchers) behind(want int64) int {
	n := 0
	for _, w := range ws.list {
		if !w.ended.Load() && w.received.Load() < want {
			n++
		}
	}
	return n
}

// close ends every stream and waits for the watchers to stop.
func (ws *watchers) close() {
	ws.cancel()
	ws.wg.Wait()
	for _, hc := range ws.clients {
		hc.CloseIdleConnections()
	}
}
