package sqlstore

import "sync"

// trimEvery is how many attempts of a subscription this process records between two trims of its
// history. Finding the attempts beyond the newest recentDeliveries walks that many index entries,
// a large part of what a record costs when it is done on every record; done on every trimEvery-th,
// it drops the same rows for a fraction of that (docs/PERFORMANCE.md#webhook-fan-out). Between
// trims the table holds up to trimEvery-1 more attempts of a subscription for each process that
// delivered it since, which WebhookDeliveries never answers.
const trimEvery = 32

// webhookTrims counts, per subscription, the attempts this process has recorded since it last
// trimmed that subscription's history. It lives in memory: after a restart, or on another replica,
// the count starts again, which only delays a trim.
type webhookTrims struct {
	mu    sync.Mutex
	since map[int32]int
}

// due counts one more recorded attempt of the subscription, and reports whether its history is
// to be trimmed with it.
func (t *webhookTrims) due(id int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since == nil {
		t.since = map[int32]int{}
	}
	t.since[id]++
	if t.since[id] < trimEvery {
		return false
	}
	delete(t.since, id)
	return true
}

// forget drops the count of a deleted subscription.
func (t *webhookTrims) forget(id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.since, id)
}
