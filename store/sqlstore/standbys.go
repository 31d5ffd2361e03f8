// Read standbys (WithReadStandbys): which database serves a read. A standby serves a read that asks
// for a position once it has replayed that far, and a read that asks for nothing while it lags by
// no more than the limit; everything else, and every read when no standby is fit, goes to the
// primary. A prober keeps each standby's replay position, and how stale that makes it, up to date.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"usersd/store"
)

const (
	// probeInterval is how often the prober reads where the primary and each standby are. A down
	// standby is passed over by the next probe, and a fresh one is known stale by at most this much.
	probeInterval = 200 * time.Millisecond
	// probeTimeout bounds one probe: a standby that does not answer in time counts as down.
	probeTimeout = 500 * time.Millisecond
	// tokenWait bounds how long a read that asks for a position waits for a standby to replay it
	// before it goes to the primary: a standby streams within milliseconds of the primary's commit,
	// so a longer wait would only delay a read that the primary can serve at once.
	tokenWait = 20 * time.Millisecond
)

// readReason is why a read went where it went.
type readReason int

const (
	readFresh           readReason = iota // a standby within the lag limit, for a read that asked for nothing
	readReplayed                          // a standby that had replayed the position the read asked for
	readPrimaryRequired                   // the read asked for the primary
	readNotReplayed                       // no standby replayed the asked position in time
	readNoFreshStandby                    // every standby lags past the limit, or is down
	readStandbyFailed                     // the standby failed the read; the primary served it again
	readReasons
)

// readReasonNames are the reasons as ReadRoute and the metrics name them.
var readReasonNames = [readReasons]string{
	readFresh: "fresh", readReplayed: "replayed", readPrimaryRequired: "primary_required",
	readNotReplayed: "not_replayed", readNoFreshStandby: "no_fresh_standby", readStandbyFailed: "standby_failed",
}

// standby is one read standby and what the prober last found of it.
type standby struct {
	name string // host:port, for logs and metrics; never the password
	db   *sql.DB

	mu sync.Mutex
	// up is false while the standby does not answer, or answers as a primary (it was promoted).
	up bool
	// replayed is the newest replay position read from it.
	replayed store.Position
	// freshAsOf is the newest time at which everything the primary had written is known replayed
	// here: the standby's data is at least as new as the primary's was then.
	freshAsOf time.Time
	// passedOverSince is when the run of probes that failed began, and failedProbes how many it
	// holds: the run is logged when it begins and when it ends, not at every probe (a promoted
	// standby fails every probe for as long as -db-read names it).
	passedOverSince time.Time
	failedProbes    int
}

// state returns what the prober last found.
func (sb *standby) state() (up bool, replayed store.Position, freshAsOf time.Time) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.up, sb.replayed, sb.freshAsOf
}

// sawReplayed records a replay position read outside the prober (by a read waiting for one).
func (sb *standby) sawReplayed(p store.Position) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.replayed = max(sb.replayed, p)
}

// down marks the standby as not answering until the next probe finds it back.
func (sb *standby) down() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.up = false
}

// primarySample is where the primary's history was at a moment.
type primarySample struct {
	at       time.Time
	position store.Position
}

// standbys routes reads between the primary and the read standbys.
type standbys struct {
	primary *sql.DB
	list    []*standby
	maxLag  time.Duration
	logger  *slog.Logger
	now     func() time.Time
	opened  time.Time

	// samples are the primary's recent positions, oldest first, kept for as long as maxLag reaches
	// back: a standby that replayed a sample's position is as fresh as the primary was at its time.
	samples []primarySample
	// next turns the choice among fit standbys, so that reads spread over all of them.
	next atomic.Uint32
	// reads counts the reads by where they went and why (ReadCounts).
	reads [2][readReasons]atomic.Int64

	stop    context.CancelFunc
	stopped chan struct{}
}

// Which database served a read: the first index of standbys.reads.
const (
	servedByPrimary = iota
	servedByStandby
)

// openStandbys opens a pool on each standby URL and probes them all once, so that reads can use
// the fit ones from the start; the prober then runs until close. A standby that is down is passed
// over until it answers: only a URL that does not parse fails.
func openStandbys(ctx context.Context, primary *sql.DB, urls []string, maxLag time.Duration, pooled bool, conns *pgConns, logger *slog.Logger) (*standbys, error) {
	r := &standbys{primary: primary, maxLag: maxLag, logger: logger, now: time.Now, opened: time.Now(), stopped: make(chan struct{})}
	for i, url := range urls {
		db, config, err := newPostgresPool(url, pooled, conns)
		if err != nil {
			r.closePools()
			return nil, fmt.Errorf("read standby %d: %w", i+1, err)
		}
		r.list = append(r.list, &standby{name: fmt.Sprintf("%s:%d", config.Host, config.Port), db: db})
	}
	r.probeOnce(ctx)
	probing, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop = stop
	go r.probe(probing)
	return r, nil
}

// pick returns the database that serves a read that requires f, and the standby it is, if it is
// one.
func (r *standbys) pick(ctx context.Context, f store.Freshness) (*sql.DB, *standby) {
	switch {
	case f.Primary:
		return r.primaryFor(readPrimaryRequired)
	case f.After != 0:
		return r.pickReplayed(ctx, f.After)
	}
	now := r.now()
	start := int(r.next.Add(1))
	for i := range r.list {
		sb := r.list[(start+i)%len(r.list)]
		if up, _, freshAsOf := sb.state(); up && now.Sub(freshAsOf) <= r.maxLag {
			return r.standbyFor(sb, readFresh)
		}
	}
	return r.primaryFor(readNoFreshStandby)
}

// pickReplayed returns a standby that has replayed after, waiting up to tokenWait for the one that
// has come closest; the primary if none gets there.
func (r *standbys) pickReplayed(ctx context.Context, after store.Position) (*sql.DB, *standby) {
	var closest *standby
	var closestAt store.Position
	start := int(r.next.Add(1))
	for i := range r.list {
		sb := r.list[(start+i)%len(r.list)]
		up, replayed, _ := sb.state()
		switch {
		case !up:
		case replayed >= after:
			return r.standbyFor(sb, readReplayed)
		case closest == nil || replayed > closestAt:
			closest, closestAt = sb, replayed
		}
	}
	if closest != nil && r.waitReplayed(ctx, closest, after) {
		return r.standbyFor(closest, readReplayed)
	}
	return r.primaryFor(readNotReplayed)
}

// waitReplayed asks sb where its replay is until it reaches after, for up to tokenWait.
func (r *standbys) waitReplayed(ctx context.Context, sb *standby, after store.Position) bool {
	ctx, cancel := context.WithTimeout(ctx, tokenWait)
	defer cancel()
	for pause := 500 * time.Microsecond; ; pause *= 2 {
		replayed, err := replayPosition(ctx, sb.db)
		if err != nil {
			return false
		}
		sb.sawReplayed(replayed)
		if replayed >= after {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
	}
}

func (r *standbys) primaryFor(reason readReason) (*sql.DB, *standby) {
	r.count(servedByPrimary, reason)
	return r.primary, nil
}

func (r *standbys) standbyFor(sb *standby, reason readReason) (*sql.DB, *standby) {
	r.count(servedByStandby, reason)
	return sb.db, sb
}

func (r *standbys) count(by int, reason readReason) { r.reads[by][reason].Add(1) }

// failed tells that sb failed a read in a way that says it is down: it is passed over until a
// probe finds it back, and the read goes to the primary.
func (r *standbys) failed(sb *standby) *sql.DB {
	sb.down()
	r.count(servedByPrimary, readStandbyFailed)
	return r.primary
}

// probe runs until ctx ends, reading the primary's position and each standby's replay every
// probeInterval.
func (r *standbys) probe(ctx context.Context) {
	defer close(r.stopped)
	ticker := time.NewTicker(probeInterval)
	defer ticker.Stop()
	for {
		r.probeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// probeOnce samples the primary, then every standby at once.
func (r *standbys) probeOnce(ctx context.Context) {
	// The time is taken before the primary is asked: a write that had returned by then lies at or
	// before the position it answers.
	at := r.now()
	sampleCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	position, err := primaryPosition(sampleCtx, r.primary)
	cancel()
	if err == nil {
		r.samples = append(r.samples, primarySample{at: at, position: position})
	}
	// Samples older than maxLag can no longer make a standby fresh enough; one is kept, so that a
	// standby that replayed it is known to be as fresh as that.
	keep := 0
	for keep < len(r.samples)-1 && at.Sub(r.samples[keep+1].at) > r.maxLag {
		keep++
	}
	r.samples = r.samples[keep:]

	var wg sync.WaitGroup
	for _, sb := range r.list {
		wg.Go(func() { r.probeStandby(ctx, sb) })
	}
	wg.Wait()
}

func (r *standbys) probeStandby(ctx context.Context, sb *standby) {
	probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	replayed, err := replayPosition(probeCtx, sb.db)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	wasUp := sb.up
	sb.up = err == nil
	if err != nil {
		if ctx.Err() != nil {
			return // the store closes: not the standby's doing (a probe that timed out is)
		}
		if sb.passedOverSince.IsZero() {
			sb.passedOverSince = r.now()
			r.logger.Warn("read standby passed over: the primary serves its reads until it answers as a standby again",
				"standby", sb.name, "error", err)
		}
		sb.failedProbes++
		return
	}
	if !sb.passedOverSince.IsZero() {
		r.logger.Info("read standby answers", "standby", sb.name,
			"passed_over_for", r.now().Sub(sb.passedOverSince).Round(time.Millisecond).String(), "failed_probes", sb.failedProbes)
		sb.passedOverSince, sb.failedProbes = time.Time{}, 0
	} else if !wasUp {
		r.logger.Info("read standby answers", "standby", sb.name)
	}
	sb.replayed = replayed
	for _, s := range r.samples {
		if s.position <= replayed && s.at.After(sb.freshAsOf) {
			sb.freshAsOf = s.at
		}
	}
}

// errNotStandby is a read standby that answers as a primary: it was promoted, and no longer
// follows the history of the primary that usersd writes to.
var errNotStandby = errors.New("the server is not in recovery: it is no longer a standby")

// primaryPosition reads where the primary's history is: the position after the last record
// inserted, so that every write that has returned lies before it.
func primaryPosition(ctx context.Context, db *sql.DB) (store.Position, error) {
	var position int64
	err := db.QueryRowContext(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::BIGINT`).Scan(&position)
	if err != nil {
		return 0, fmt.Errorf("read the primary's position: %w", err)
	}
	return store.Position(position), nil
}

// replayPosition reads how far a standby has replayed the primary's history.
func replayPosition(ctx context.Context, db *sql.DB) (store.Position, error) {
	var position sql.NullInt64
	err := db.QueryRowContext(ctx, `SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::BIGINT
		WHERE pg_is_in_recovery()`).Scan(&position)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, errNotStandby
	case err != nil:
		return 0, fmt.Errorf("read the standby's replay position: %w", err)
	case !position.Valid:
		return 0, errors.New("the standby has replayed nothing yet")
	}
	return store.Position(position.Int64), nil
}

// close stops the prober and closes the standbys' pools; inUse is how many connections requests
// still held.
func (r *standbys) close() (inUse int, err error) {
	r.stop()
	<-r.stopped
	for _, sb := range r.list {
		inUse += sb.db.Stats().InUse
	}
	return inUse, r.closePools()
}

func (r *standbys) closePools() error {
	var err error
	for _, sb := range r.list {
		err = errors.Join(err, sb.db.Close())
	}
	return err
}

// ReadRoute is how many reads went to the primary or to a standby for one reason.
type ReadRoute struct {
	Standby bool
	Reason  string // fresh or replayed (a standby's); primary_required, not_replayed, no_fresh_standby or standby_failed
	Reads   int64
}

// ReadRoutes reports where the reads went, and why, since the store opened; nil without read
// standbys, where every read is the primary's.
func (s *Store) ReadRoutes() []ReadRoute {
	if s.standbys == nil {
		return nil
	}
	var routes []ReadRoute
	for by := range s.standbys.reads {
		for reason, name := range readReasonNames {
			routes = append(routes, ReadRoute{Standby: by == servedByStandby, Reason: name, Reads: s.standbys.reads[by][reason].Load()})
		}
	}
	return routes
}

// StandbyState is what the prober last found of a read standby.
type StandbyState struct {
	Name string // host:port
	Up   bool
	// Lag is how far behind the primary the standby's data may be: the time since the newest
	// moment whose writes it is known to have replayed (or, if it has never been known to hold
	// any, since the store opened). It is counted up to now, so it grows while a standby does not
	// answer.
	Lag time.Duration
}

// Standbys reports the state of each read standby, in the order they were given.
func (s *Store) Standbys() []StandbyState {
	if s.standbys == nil {
		return nil
	}
	now := s.standbys.now()
	states := make([]StandbyState, len(s.standbys.list))
	for i, sb := range s.standbys.list {
		up, _, freshAsOf := sb.state()
		if freshAsOf.Before(s.standbys.opened) {
			freshAsOf = s.standbys.opened
		}
		states[i] = StandbyState{Name: sb.name, Up: up, Lag: now.Sub(freshAsOf)}
	}
	return states
}
