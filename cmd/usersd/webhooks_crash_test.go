package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// TestWebhooksDeliverEveryAcknowledgedCreateAcrossSIGKILL kills the real binary with SIGKILL under 64
// writers while it delivers to a receiver on loopback, and starts it again on the same file: every
// create acknowledged before the kill reaches the receiver, in sequence order, and the only change
// sent twice is the one under way at the kill, again under its webhook-id.
func TestWebhooksDeliverEveryAcknowledgedCreateAcrossSIGKILL(t *testing.T) {
	t.Parallel() // checks what was delivered, not how fast
	var mu sync.Mutex
	var arrived []int64         // sequences, in the order they came
	delivered := map[int]bool{} // user ids
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var event struct {
			ID   string
			Data struct{ ID int }
		}
		if err := json.Unmarshal(body, &event); err != nil || event.ID != r.Header.Get("webhook-id") {
			t.Errorf("a delivery with webhook-id %q: %v: %s", r.Header.Get("webhook-id"), err, body)
		}
		sequence, _ := strconv.ParseInt(event.ID, 10, 64)
		mu.Lock()
		arrived = append(arrived, sequence)
		delivered[event.Data.ID] = true
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)

	dbPath := filepath.Join(t.TempDir(), "users.db")
	flags := []string{"-webhooks-allow-http", "-webhooks-allow-private"}
	first := proctest.Start(t, nil, dbPath, flags...)
	if _, err := apitest.WebhooksClient(first.BaseURL, apitest.RPCProtocols[0], apitest.Key).CreateWebhook(context.Background(),
		&usersv1.CreateWebhookRequest{Webhook: &usersv1.Webhook{Url: receiver.URL}}); err != nil {
		t.Fatal(err)
	}

	var ackedMu sync.Mutex
	var acked []int
	ctx, stop := context.WithCancel(context.Background())
	var writers sync.WaitGroup
	for w := range 64 {
		writers.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				req, _ := http.NewRequestWithContext(ctx, "POST", first.BaseURL+"/users", strings.NewReader(fmt.Sprintf(`{"name":"writer %d #%d"}`, w, n)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-api-key", apitest.Key)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the process died
				}
				var user struct{ ID int }
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusCreated && json.Unmarshal(body, &user) == nil {
					ackedMu.Lock()
					acked = append(acked, user.ID)
					ackedMu.Unlock()
				}
			}
		})
	}
	// The subscription is delivered from the moment it is made; the writes go on for 5 s.
	time.Sleep(5 * time.Second)
	if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Cmd.Wait()
	stop()
	writers.Wait()
	mu.Lock()
	atKill := len(arrived)
	mu.Unlock()
	if len(acked) == 0 || atKill == 0 {
		t.Fatalf("%d creates acknowledged and %d delivered before the kill: the load did not get going", len(acked), atKill)
	}

	proctest.Start(t, nil, dbPath, flags...)
	// The new process takes the subscription over once the killed one's lease runs out (20 s), then
	// catches up at whatever pace the machine allows (under the race detector's step, with every
	// other package's tests at work, a few thousand deliveries can take most of a minute): the test
	// fails when deliveries stop coming while some are missing, not when they come slowly.
	const stalled = 45 * time.Second
	progressed, lastMissing := time.Now(), -1
	for {
		mu.Lock()
		missing := 0
		for _, id := range acked {
			if !delivered[id] {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if missing != lastMissing {
			progressed, lastMissing = time.Now(), missing
		}
		if time.Since(progressed) > stalled {
			t.Fatalf("%d of %d acknowledged creates not delivered, and none delivered in the last %s", missing, len(acked), stalled)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	repeats := 0
	for i := 1; i < len(arrived); i++ {
		switch {
		case arrived[i] > arrived[i-1]:
		case arrived[i] == arrived[i-1] && (i == atKill || i == atKill+1) && repeats == 0:
			repeats++ // the change under way at the kill (it may arrive just after it was counted), sent again first
		default:
			t.Fatalf("delivery %d is of sequence %d after %d (%d delivered before the kill)", i, arrived[i], arrived[i-1], atKill)
		}
	}
	t.Logf("%d creates acknowledged before the kill; %d deliveries, %d before the kill; %d sent again", len(acked), len(arrived), atKill, repeats)
}
