package sqlstore

import "sync"

// trimEvery is how many attempts of a subscription this process records between two trims of its
// history. Finding the attempts beyond the newest recentDeliveries walks that many index entries,
// a large part of what a record costs when it is done on every record; done on every trimEvery-th,
// it drops the same rows for a fraction of that (docs/PERFORMANCE.md#device-webhook-records).
const trimEvery = 32

// webhookTrims says, per subscription, when this process trims its history of attempts: at the
// first record the process makes of it, then at every trimEvery-th. The count lives in memory, so
// the first record after a start trims what an earlier process (or another replica) left; and a
// trim whose write failed is due again at the next record. So the history holds at most
// trimEvery-1 attempts more than recentDeliveries for each process that delivered the subscription
// since its last trim, which WebhookDeliveries never answers.
type webhookTrims struct {
	mu    sync.Mutex
	since map[int32]int // records since the last trim, by subscription; absent: none made yet
}

// due counts one more record of the subscription, and reports whether it trims the history.
func (t *webhookTrims) due(id int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since == nil {
		t.since = map[int32]int{}
	}
	n, seen := t.since[id]
	if !seen || n+1 >= trimEvery {
		t.since[id] = 0
		return true
	}
	t.since[id] = n + 1
	return false
}

// forget drops the subscription's count: it was deleted, or the record due to trim its history was
// not written, and then the next record trims instead, as a process's first one does.
func (t *webhookTrims) forget(id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.since, id)
}
