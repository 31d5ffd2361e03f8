package webhooks

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"usersd/store"
)

// Store is what the engine and the service need of a store: the subscriptions, and the change log
// they are sent.
type Store interface {
	store.Webhooks
	store.ChangeLog
}

const (
	// leaseTTL is how long a process holds a subscription without renewing it: when a replica dies,
	// another takes its subscriptions over within it (and a leaseEvery).
	leaseTTL = 20 * time.Second
	// leaseEvery is how often the leases are taken and renewed, and new subscriptions found.
	leaseEvery = 3 * time.Second
	// eventsPerRead is how many changes a deliverer reads from the log at a time.
	eventsPerRead = 100
	// pollEvery is how often a deliverer that has sent everything reads the log without a notice
	// (a notice from another replica can be lost while a connection is down).
	pollEvery = time.Second
	// giveUpAfter is how long a receiver may fail before its subscription is disabled.
	giveUpAfter = 72 * time.Hour
)

// Engine delivers the subscriptions whose lease this process holds, each in its own goroutine, one
// change at a time, in sequence order.
type Engine struct {
	store   Store
	client  *http.Client
	owner   string // this process, as the leases name it
	source  string // the CloudEvents source of every event
	log     *slog.Logger
	metrics *metrics
	// reads are the deliverers' reads of the change log, shared among them; Run makes them.
	reads *sharedReads
	// poke asks for a lease round now: a caller of this process made or changed a subscription.
	poke chan struct{}
	// leaseFailures counts the lease rounds that failed in a row: the log says when they begin and
	// when they end, not every round (a failover lasts many).
	leaseFailures int
}

// NewEngine returns an engine that delivers st's subscriptions to receivers the policy allows, as
// events from source (a URI reference that names this service, such as https://users.example.com).
func NewEngine(st Store, policy Policy, source string, log *slog.Logger, m *Metrics) *Engine {
	return &Engine{store: st, client: newClient(policy), owner: "usersd-" + rand.Text(), source: source, log: log, metrics: m.orNone(),
		poke: make(chan struct{}, 1)}
}

// Poke makes the engine run its lease round now rather than at its next tick: a subscription a
// caller of this process has just made is delivered from its first change, and one it enabled again
// or replayed is taken up at once if this process holds its lease (or the lease has run out). A
// subscription another replica holds is taken up by that replica at its own next round.
func (e *Engine) Poke() {
	select {
	case e.poke <- struct{}{}:
	default:
	}
}

// deliverer is the goroutine of one subscription.
type deliverer struct {
	generation int64 // of the newest copy it was given
	cancel     context.CancelFunc
	done       chan struct{}
	wake       chan struct{}
	// changed takes a newer copy of the subscription (a new secret, URL, types or role), which the
	// deliverer takes up before its next attempt: a caller's change never cuts off an attempt
	// under way, which would send its change twice.
	changed chan store.Webhook
}

// offer gives the deliverer a newer copy, replacing one it has not taken up yet.
func (d *deliverer) offer(w store.Webhook) {
	select {
	case <-d.changed:
	default:
	}
	d.changed <- w
	d.generation = w.Generation
}

// nudge wakes the deliverer if it waits for a change.
func (d *deliverer) nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then gives up its leases so that another replica takes over at once.
func (e *Engine) Run(ctx context.Context) {
	e.reads = newSharedReads(ctx, e.store)
	wake := make(chan struct{}, 1)
	stopNotices := e.store.NotifyUserEvents(wake)
	defer stopNotices()
	running := map[int32]*deliverer{}
	defer func() {
		for id, d := range running {
			e.stop(id, d)
		}
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := e.store.ReleaseWebhooks(release, e.owner); err != nil {
			e.log.Warn("webhook leases not given up: another replica takes over when they run out", "error", err)
		}
	}()
	lease := time.NewTicker(leaseEvery)
	defer lease.Stop()
	for {
		e.lease(ctx, running)
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
				// Before any deliverer wakes, so that no read begun after this shares a page read
				// before the notice. A deliverer that joined such a read just before finds the wake-up
				// below waiting when it next sleeps, and reads again.
				e.reads.newRound()
				for _, d := range running {
					d.nudge()
				}
				continue
			case <-lease.C:
			case <-e.poke:
			}
			break
		}
	}
}

// lease takes and renews the leases, starts a deliverer for each new subscription held, gives a
// running one the newer copy of a subscription that a caller changed, and stops those no longer
// held.
func (e *Engine) lease(ctx context.Context, running map[int32]*deliverer) {
	held, err := e.store.LeaseWebhooks(ctx, e.owner, leaseTTL)
	if err != nil {
		if e.leaseFailures++; e.leaseFailures == 1 && ctx.Err() == nil {
			e.log.Warn("webhook leases not renewed: trying again every few seconds", "error", err)
		}
		return // the deliverers go on until their leases run out, when their records fail
	}
	if e.leaseFailures > 0 {
		e.log.Info("webhook leases renewed again", "failed_rounds", e.leaseFailures)
		e.leaseFailures = 0
	}
	holds := map[int32]bool{}
	for _, w := range held {
		holds[w.ID] = true
		if d, ok := running[w.ID]; ok {
			select {
			case <-d.done: // it stopped (its lease was lost, or it was disabled): start afresh
				e.stop(w.ID, d)
			default:
				if d.generation != w.Generation {
					d.offer(w)
					d.nudge() // an idle deliverer takes a replay up now, not at its next poll
				}
				continue
			}
		}
		running[w.ID] = e.start(ctx, w)
	}
	for id, d := range running {
		if !holds[id] {
			e.stop(id, d)
			delete(running, id)
		}
	}
}

func (e *Engine) start(ctx context.Context, w store.Webhook) *deliverer {
	ctx, cancel := context.WithCancel(ctx)
	d := &deliverer{generation: w.Generation, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1), changed: make(chan store.Webhook, 1)}
	go func() {
		defer close(d.done)
		e.deliver(ctx, w, d.wake, d.changed)
	}()
	return d
}

func (e *Engine) stop(id int32, d *deliverer) {
	d.cancel()
	<-d.done
	e.metrics.forget(id)
}

// deliver sends the subscription's changes, from its position on, until ctx ends or the store says
// that this process no longer holds it (or holds an older copy of it).
func (e *Engine) deliver(ctx context.Context, sub store.Webhook, wake <-chan struct{}, changed <-chan store.Webhook) {
	unread := 0 // reads of the log that failed in a row: logged when they begin and end
	for ctx.Err() == nil {
		sub = takeUp(sub, changed)
		if !sub.NextAttempt.IsZero() && time.Until(sub.NextAttempt) > 0 {
			// The backoff: a newer copy ends it early only when it carries a replay, which starts
			// afresh (newerCopy keeps the deliverer's own backoff otherwise).
			fresh, ok := backOff(ctx, time.Until(sub.NextAttempt), changed)
			if !ok {
				return
			}
			if fresh != nil {
				sub = newerCopy(sub, *fresh)
				continue
			}
		}
		page, err := e.reads.read(ctx, sub.Delivered)
		switch {
		case errors.Is(err, store.ErrEventsSwept):
			// Kept 7 days for an enabled subscription: this one was disabled longer, then enabled.
			e.record(ctx, sub, store.WebhookAttempt{Sequence: sub.Delivered + 1, Error: "the changes after " +
				formatSequence(sub.Delivered) + " were swept from the log before they could be sent", At: time.Now()},
				store.WebhookOutcome{Disable: "changes it was owed were swept from the log", Record: true})
			return
		case err != nil:
			if unread++; unread == 1 && ctx.Err() == nil {
				e.log.Warn("webhook deliveries wait for the change log", "webhook", sub.ID, "error", err)
			}
			if !sleep(ctx, pollEvery, nil) {
				return
			}
			continue
		case unread > 0:
			e.log.Info("webhook deliveries read the change log again", "webhook", sub.ID, "failed_reads", unread)
			unread = 0
		}
		var ok bool
		if len(page.Events) > 0 {
			replays := sub.Replays
			if sub, ok = e.current(ctx, sub); !ok {
				return
			}
			if sub.Replays != replays {
				continue // a replay moved the position: the page read from the old one is not to be sent
			}
		}
		if sub, ok = e.deliverPage(ctx, sub, page, changed); !ok {
			return
		}
		if len(page.Events) < eventsPerRead && sub.FailedAttempts == 0 {
			e.metrics.lag(sub.ID, 0)
			if !sleep(ctx, pollEvery, wake) {
				return
			}
		}
	}
}

// deliverPage sends a page's changes that the subscription wants, in order, stopping at the first
// that fails; it returns the subscription as the store holds it after, and false when this process
// no longer holds it.
func (e *Engine) deliverPage(ctx context.Context, sub store.Webhook, page store.UserEvents, changed <-chan store.Webhook) (store.Webhook, bool) {
	var passedOver int64 // the last change not wanted since the last one recorded
	replays := sub.Replays
	for _, ev := range page.Events {
		sub = takeUp(sub, changed)
		if sub.Replays != replays {
			return sub, true // a replay moved the position: the rest of the page is read again from it
		}
		if !wants(sub, ev) {
			passedOver = ev.Sequence
			continue
		}
		e.metrics.lag(sub.ID, time.Since(ev.At).Seconds())
		next, delivered, ok := e.attempt(ctx, sub, ev)
		if !ok {
			return sub, false
		}
		sub, passedOver = next, 0
		if !delivered {
			return sub, true
		}
	}
	if passedOver > sub.Delivered {
		next, err := e.store.RecordWebhookAttempt(ctx, e.owner, sub, store.WebhookAttempt{Sequence: passedOver}, store.WebhookOutcome{Delivered: true})
		if err != nil {
			return sub, e.keepGoing(ctx, sub, err)
		}
		sub = next
	}
	return sub, true
}

// keepGoing says whether a deliverer goes on after a store error: not when it lost its lease, or
// ctx ended; after a pause otherwise.
func (e *Engine) keepGoing(ctx context.Context, sub store.Webhook, err error) bool {
	if errors.Is(err, store.ErrLeaseLost) || ctx.Err() != nil {
		return false
	}
	e.log.Warn("webhook delivery not recorded: the change is sent again", "webhook", sub.ID, "error", err)
	return sleep(ctx, pollEvery, nil)
}

// current reads the subscription again after a page of the log, so that a caller's change (a pause,
// a delete, a new URL, types, role or secret, a replay) holds for every change logged after its
// answer: each change of the page was logged before this read, which sees every change answered
// before it. It returns the subscription to go on with, and false when it is no longer to be
// delivered (disabled or deleted), or ctx ended.
func (e *Engine) current(ctx context.Context, sub store.Webhook) (store.Webhook, bool) {
	for failed := 0; ; failed++ {
		fresh, err := e.store.GetWebhook(ctx, sub.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return sub, false
		case err == nil && !fresh.Enabled:
			return sub, false
		case err == nil && fresh.Generation != sub.Generation:
			return newerCopy(sub, fresh), true
		case err == nil:
			return sub, true
		}
		// Not knowing whether it was paused, send nothing until the read works.
		if failed == 0 && ctx.Err() == nil {
			e.log.Warn("webhook deliveries wait to read their subscription", "webhook", sub.ID, "error", err)
		}
		if !sleep(ctx, pollEvery, nil) {
			return sub, false
		}
	}
}

// takeUp takes up a newer copy of the subscription, if one came from the lease round.
func takeUp(sub store.Webhook, changed <-chan store.Webhook) store.Webhook {
	select {
	case fresh := <-changed:
		return newerCopy(sub, fresh)
	default:
		return sub
	}
}

// newerCopy is the subscription with a newer copy's secrets, URL, types and role. Its position and
// failures stay the deliverer's own, which the copy may predate, unless the copy comes from a
// replay: then it starts from the replay's. Copies come from the lease round and from current, so
// one may be older than the deliverer's: an older generation is not taken.
func newerCopy(sub, fresh store.Webhook) store.Webhook {
	if fresh.Generation < sub.Generation {
		return sub
	}
	if fresh.Replays == sub.Replays {
		fresh.Delivered, fresh.FailedAttempts, fresh.FailingSince, fresh.NextAttempt = sub.Delivered, sub.FailedAttempts, sub.FailingSince, sub.NextAttempt
	}
	return fresh
}

// wants reports whether the subscription is sent the change: of one of its types, and of its role.
func wants(sub store.Webhook, ev store.UserEvent) bool {
	if sub.Role != "" && !ev.HasRole(sub.Role) {
		return false
	}
	if len(sub.Types) == 0 {
		return true
	}
	for _, t := range sub.Types {
		if t == eventTypes[ev.Kind] {
			return true
		}
	}
	return false
}

// backOff waits for d, or for a newer copy of the subscription, which it returns; false if ctx
// ended first.
func backOff(ctx context.Context, d time.Duration, changed <-chan store.Webhook) (*store.Webhook, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil, false
	case <-timer.C:
		return nil, true
	case fresh := <-changed:
		return &fresh, true
	}
}

// sleep waits for d, or a wake-up, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
	case <-wake:
	}
	return true
}
