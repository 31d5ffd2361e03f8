package webhooks

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"usersd/store"
)

// sharedPageFor is the longest a page of the log read for one deliverer serves others: well under
// pollEvery, so that a deliverer's poll, which catches the changes whose notice was lost, reads a
// page no older than that.
const sharedPageFor = 100 * time.Millisecond

// sharedReads are the engine's reads of the change log, shared among its deliverers. A change
// wakes every deliverer, and those that are caught up all read the same page from the same
// position: one read serves them all, instead of one a subscription. A page never hides a change
// that woke anybody: a notice starts a new round, which shares nothing read before it, before the
// engine wakes a deliverer (Run).
type sharedReads struct {
	ctx    context.Context // the engine's: a read outlives the deliverer that began it
	store  store.ChangeLog
	flight singleflight.Group
	mu     sync.Mutex
	round  uint64
	pages  map[int64]sharedPage // by the position they were read after, in this round
	now    func() time.Time     // the clock pages age by: time.Now but in tests
}

// sharedPage is a page of the log and when the read of it began.
type sharedPage struct {
	page store.UserEvents
	read time.Time
}

func newSharedReads(ctx context.Context, log store.ChangeLog) *sharedReads {
	return &sharedReads{ctx: ctx, store: log, pages: map[int64]sharedPage{}, now: time.Now}
}

// newRound forgets every page read so far: a change may have been logged after them.
func (r *sharedReads) newRound() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.round++
	clear(r.pages)
}

// read returns the page of the log after the position after: one read in this round, begun less
// than sharedPageFor ago, or one under way for another deliverer, or a new one. Pages are shared:
// their callers only read them.
func (r *sharedReads) read(ctx context.Context, after int64) (store.UserEvents, error) {
	r.mu.Lock()
	round := r.round
	if p, ok := r.pages[after]; ok && r.now().Sub(p.read) < sharedPageFor {
		r.mu.Unlock()
		return p.page, nil
	}
	r.mu.Unlock()
	key := strconv.FormatUint(round, 10) + ":" + strconv.FormatInt(after, 10)
	result := r.flight.DoChan(key, func() (any, error) {
		began := r.now()
		page, err := r.store.UserEvents(r.ctx, after, eventsPerRead)
		if err == nil {
			r.mu.Lock()
			if r.round == round {
				// Notices may not come for a long while (another replica's can be lost): what no
				// read may take any more goes, so that the pages kept are those of the last moments.
				for at, p := range r.pages {
					if r.now().Sub(p.read) >= sharedPageFor {
						delete(r.pages, at)
					}
				}
				r.pages[after] = sharedPage{page: page, read: began}
			}
			r.mu.Unlock()
		}
		return page, err
	})
	select {
	case <-ctx.Done():
		return store.UserEvents{}, ctx.Err()
	case res := <-result:
		if res.Err != nil {
			return store.UserEvents{}, res.Err
		}
		return res.Val.(store.UserEvents), nil
	}
}
