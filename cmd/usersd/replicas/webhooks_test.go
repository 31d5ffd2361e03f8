package replicas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestPostgresReplicasDeliverEachSubscriptionOnceAtATime runs three replicas on one PostgreSQL
// database, directly and through PgBouncer, with one webhook subscription, and kills (SIGKILL) the
// replica that delivers it under a steady load of creates spread over all three. One replica
// delivers at a time (the receiver never has two deliveries under way), another takes over within
// 30 s, and every acknowledged create arrives, in sequence order, the one under way at the kill
// perhaps twice.
func TestPostgresReplicasDeliverEachSubscriptionOnceAtATime(t *testing.T) {
	t.Parallel() // checks what was delivered, not how fast: see startProcess
	eachTopology(t, testReplicasDeliverOnceAtATime)
}

func testReplicasDeliverOnceAtATime(t *testing.T, db string, flags []string) {
	var mu sync.Mutex
	var arrived []int64
	var arrivedAt []time.Time
	delivered := map[float64]bool{}
	var underWay, overlaps atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if underWay.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer underWay.Add(-1)
		body, _ := io.ReadAll(r.Body)
		var event struct {
			ID   string
			Data map[string]any
		}
		json.Unmarshal(body, &event)
		sequence, _ := strconv.ParseInt(event.ID, 10, 64)
		time.Sleep(2 * time.Millisecond) // long enough for a second deliverer to overlap, were there one
		mu.Lock()
		arrived, arrivedAt = append(arrived, sequence), append(arrivedAt, time.Now())
		delivered[event.Data["id"].(float64)] = true
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	flags = append(flags, "-webhooks-allow-http", "-webhooks-allow-private")

	// The first replica alone takes the subscription's lease; the others start after it delivers.
	deliverer, first, _ := startProcess(t, db, flags...)
	if _, err := apitest.WebhooksClient(first.BaseURL, apitest.RPCProtocols[0], apitest.Key).CreateWebhook(context.Background(),
		&usersv1.CreateWebhookRequest{Webhook: &usersv1.Webhook{Url: receiver.URL}}); err != nil {
		t.Fatal(err)
	}
	replicas := []*testServer{first}
	apitest.CreateUser(t, first.BaseURL, "first", "")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing delivered within 30 s")
		}
	}
	for range 2 {
		_, s, _ := startProcess(t, db, flags...)
		replicas = append(replicas, s)
	}

	var killedFirst atomic.Bool
	var ackedMu sync.Mutex
	var acked []float64
	ctx, stop := context.WithCancel(context.Background())
	var writers sync.WaitGroup
	for w := range 8 {
		writers.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				s := replicas[(w+n)%len(replicas)]
				if s == first && killedFirst.Load() {
					continue
				}
				status, body, err := apitest.PostJSON(s.BaseURL+"/users", fmt.Sprintf(`{"name":"writer %d #%d"}`, w, n))
				var user map[string]any
				if err == nil && status == http.StatusCreated && json.Unmarshal(body, &user) == nil {
					ackedMu.Lock()
					acked = append(acked, user["id"].(float64))
					ackedMu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second)
	killedFirst.Store(true)
	deliverer.Process.Kill()
	killed := time.Now()
	mu.Lock()
	atKill := len(arrived)
	mu.Unlock()
	deliverer.Wait()
	// A delivery the killed replica had sent may still be under way in the receiver; once it is
	// done, every delivery is another replica's (which takes the lease over when it runs out).
	for deadline := time.Now().Add(time.Second); underWay.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	afterDeath := len(arrived)
	mu.Unlock()
	time.Sleep(3 * time.Second)
	stop()
	writers.Wait()

	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
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
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged creates not delivered within 90 s", missing, len(acked))
		}
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d deliveries came while another was under way: two replicas delivered at once", n)
	}
	resumed := arrivedAt[len(arrivedAt)-1]
	if afterDeath < len(arrivedAt) {
		resumed = arrivedAt[afterDeath]
	}
	for i := 1; i < len(arrived); i++ {
		// The delivery under way at the kill may arrive just after it was counted, and again first.
		if arrived[i] < arrived[i-1] || arrived[i] == arrived[i-1] && i != atKill && i != atKill+1 {
			t.Fatalf("delivery %d is of sequence %d after %d (%d delivered before the kill)", i, arrived[i], arrived[i-1], atKill)
		}
	}
	if took := resumed.Sub(killed); took > 30*time.Second {
		t.Errorf("deliveries resumed %v after the deliverer was killed; another replica must take over within 30 s", took)
	}
	t.Logf("%d creates acknowledged, %d deliveries (%d before the kill); another replica delivered %v after the kill",
		len(acked), len(arrived), atKill, resumed.Sub(killed).Round(time.Millisecond))
}
