// Rate limits: a token bucket per caller, in front of every route that reads or changes users. A
// caller is its key's name (or its token's subject), or, for a request without a valid credential,
// its client address. Limits are per process. The limiter says how much is left; the face writes
// it in the headers its protocol has for that.
package auth

import (
	"hash/maphash"
	"math"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxRateCallers bounds the callers whose buckets a service keeps (see Limiter).
const maxRateCallers = 100_000

// rateShards splits the buckets, so that callers on different cores seldom wait for one lock.
const rateShards = 64

// rateEvictionSample is how many buckets a full shard looks at to choose one to drop.
const rateEvictionSample = 8

// Limiter holds a bucket for each caller seen, at most about maxCallers of them: an attacker
// with a million client addresses must not grow memory without bound. A shard that is full drops a
// bucket to make room: among a few it looks at, one that has filled up again (dropping it changes
// nothing: a new bucket starts full), or else the one used longest ago. A dropped caller that comes
// back starts with a full bucket, which gives away at most one burst.
type Limiter struct {
	limit  rate.Limit
	burst  int
	seed   maphash.Seed
	shards [rateShards]rateShard
	// perShard is the most buckets a shard keeps.
	perShard int
	// policy is the RateLimit-Policy header of every answer, as the IETF draft
	// (draft-ietf-httpapi-ratelimit-headers) writes it: the bucket holds burst requests and fills
	// up again in w seconds.
	policy string
}

type rateShard struct {
	mu      sync.Mutex
	buckets map[string]*rateBucket
}

type rateBucket struct {
	limiter  *rate.Limiter
	lastUsed time.Time
}

// newLimiter returns a limiter of perSecond requests a second per caller, with bursts of burst
// (0: twice perSecond, at least 1), keeping the buckets of about maxCallers callers; nil if
// perSecond is 0 (no limit).
func newLimiter(perSecond float64, burst, maxCallers int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	if burst == 0 {
		burst = max(1, int(math.Ceil(2*perSecond)))
	}
	window := math.Ceil(float64(burst) / perSecond)
	l := &Limiter{limit: rate.Limit(perSecond), burst: burst, seed: maphash.MakeSeed(),
		perShard: max(1, maxCallers/rateShards),
		policy:   `"caller";q=` + strconv.Itoa(burst) + ";w=" + strconv.FormatFloat(window, 'f', 0, 64)}
	for i := range l.shards {
		l.shards[i].buckets = map[string]*rateBucket{}
	}
	return l
}

// RateDecision is what the limiter said of a request: whether it may go on, what is left of its
// caller's bucket, and how long until the bucket has a token again (when it is empty).
type RateDecision struct {
	Allowed   bool
	Remaining int
	Retry     time.Duration
}

// take takes a token from caller's bucket, if it has one.
func (l *Limiter) take(caller string, now time.Time) RateDecision {
	shard := l.shardOf(caller)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	b := shard.buckets[caller]
	if b == nil {
		if len(shard.buckets) >= l.perShard {
			shard.evictOne(now, l.burst)
		}
		b = &rateBucket{limiter: rate.NewLimiter(l.limit, l.burst)}
		shard.buckets[caller] = b
	}
	b.lastUsed = now
	taken := b.limiter.AllowN(now, 1)
	return l.decision(taken, b.limiter.TokensAt(now))
}

// peek says whether caller's bucket has a token, without taking it. A caller without a bucket has
// a full one.
func (l *Limiter) peek(caller string, now time.Time) RateDecision {
	shard := l.shardOf(caller)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	tokens := float64(l.burst)
	if b := shard.buckets[caller]; b != nil {
		tokens = b.limiter.TokensAt(now)
	}
	return l.decision(tokens >= 1, tokens)
}

func (l *Limiter) shardOf(caller string) *rateShard {
	return &l.shards[maphash.String(l.seed, caller)%rateShards]
}

// decision is what a bucket holding tokens says: allowed, or how long until it has a whole token.
func (l *Limiter) decision(allowed bool, tokens float64) RateDecision {
	if !allowed {
		return RateDecision{Retry: time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))}
	}
	return RateDecision{Allowed: true, Remaining: int(tokens)}
}

// evictOne drops a bucket of the shard, which holds its lock: see Limiter. Go's map iteration
// starts at a random place, so the buckets looked at are a sample.
func (s *rateShard) evictOne(now time.Time, burst int) {
	var oldest string
	var oldestUse time.Time
	looked := 0
	for caller, b := range s.buckets {
		if b.limiter.TokensAt(now) >= float64(burst) {
			delete(s.buckets, caller)
			return
		}
		if looked == 0 || b.lastUsed.Before(oldestUse) {
			oldest, oldestUse = caller, b.lastUsed
		}
		if looked++; looked == rateEvictionSample {
			break
		}
	}
	delete(s.buckets, oldest)
}

// Policy is the RateLimit-Policy of every answer, as the IETF draft
// (draft-ietf-httpapi-ratelimit-headers) writes it.
func (l *Limiter) Policy() string { return l.policy }

// State is the draft's RateLimit of an answer that d decided: r is what is left of the caller's
// quota, t the seconds until the bucket is full again (or, when it is empty, until it has a token).
func (l *Limiter) State(d RateDecision) string {
	wait := d.Retry
	if d.Allowed {
		wait = time.Duration(float64(l.burst-d.Remaining) / float64(l.limit) * float64(time.Second))
	}
	return `"caller";r=` + strconv.Itoa(d.Remaining) + ";t=" + strconv.Itoa(ceilSeconds(wait))
}

// RetryAfter is the whole seconds a refused caller waits until its bucket has a token again.
func (d RateDecision) RetryAfter() int { return ceilSeconds(d.Retry) }

func ceilSeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }

// addressBucket is the bucket of a request without a valid credential: its client's address
// (host:port, or a host). An IPv6 client is its /64, the block a single host usually holds, so
// that it cannot take a new bucket with each address of its block.
func addressBucket(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return "address " + host
	}
	addr = addr.Unmap()
	if addr.Is6() {
		prefix, _ := addr.Prefix(64)
		return "address " + prefix.String()
	}
	return "address " + addr.String()
}
