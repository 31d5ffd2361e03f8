// Rate limits: a token bucket per caller, in front of every route that reads or changes users. A
// caller is its key's name (or its token's subject), or, for a request without a valid credential,
// its client address. Limits are per process.
package handlers

import (
	"hash/maphash"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxRateCallers bounds the callers whose buckets are kept (see rateLimiter).
const maxRateCallers = 100_000

// rateShards splits the buckets, so that callers on different cores seldom wait for one lock.
const rateShards = 64

// rateEvictionSample is how many buckets a full shard looks at to choose one to drop.
const rateEvictionSample = 8

// rateLimiter holds a bucket for each caller seen, at most about maxCallers of them: an attacker
// with a million client addresses must not grow memory without bound. A shard that is full drops a
// bucket to make room: among a few it looks at, one that has filled up again (dropping it changes
// nothing: a new bucket starts full), or else the one used longest ago. A dropped caller that comes
// back starts with a full bucket, which gives away at most one burst.
type rateLimiter struct {
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

// newRateLimiter returns a limiter of perSecond requests a second per caller, with bursts of burst
// (0: twice perSecond, at least 1), keeping the buckets of about maxCallers callers; nil if
// perSecond is 0 (no limit).
func newRateLimiter(perSecond float64, burst, maxCallers int) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	if burst == 0 {
		burst = max(1, int(math.Ceil(2*perSecond)))
	}
	window := math.Ceil(float64(burst) / perSecond)
	l := &rateLimiter{limit: rate.Limit(perSecond), burst: burst, seed: maphash.MakeSeed(),
		perShard: max(1, maxCallers/rateShards),
		policy:   `"caller";q=` + strconv.Itoa(burst) + ";w=" + strconv.FormatFloat(window, 'f', 0, 64)}
	for i := range l.shards {
		l.shards[i].buckets = map[string]*rateBucket{}
	}
	return l
}

// rateDecision is what the limiter said of a request: whether it may go on, what is left of its
// caller's bucket, and how long until the bucket has a token again (when it is empty).
type rateDecision struct {
	allowed   bool
	remaining int
	retry     time.Duration
}

// take takes a token from caller's bucket, if it has one.
func (l *rateLimiter) take(caller string, now time.Time) rateDecision {
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
func (l *rateLimiter) peek(caller string, now time.Time) rateDecision {
	shard := l.shardOf(caller)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	tokens := float64(l.burst)
	if b := shard.buckets[caller]; b != nil {
		tokens = b.limiter.TokensAt(now)
	}
	return l.decision(tokens >= 1, tokens)
}

func (l *rateLimiter) shardOf(caller string) *rateShard {
	return &l.shards[maphash.String(l.seed, caller)%rateShards]
}

// decision is what a bucket holding tokens says: allowed, or how long until it has a whole token.
func (l *rateLimiter) decision(allowed bool, tokens float64) rateDecision {
	if !allowed {
		return rateDecision{retry: time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))}
	}
	return rateDecision{allowed: true, remaining: int(tokens)}
}

// evictOne drops a bucket of the shard, which holds its lock: see rateLimiter. Go's map iteration
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

// setHeaders writes the draft's RateLimit-Policy and RateLimit on an answer, and Retry-After on a
// refusal: r is what is left of the caller's quota, t the seconds until the bucket is full again
// (or, when it is empty, until it has a token).
func (l *rateLimiter) setHeaders(h http.Header, d rateDecision) {
	h.Set("RateLimit-Policy", l.policy)
	var wait time.Duration
	if d.allowed {
		wait = time.Duration(float64(l.burst-d.remaining) / float64(l.limit) * float64(time.Second))
	} else {
		wait = d.retry
		h.Set("Retry-After", strconv.Itoa(ceilSeconds(wait)))
	}
	h.Set("RateLimit", `"caller";r=`+strconv.Itoa(d.remaining)+";t="+strconv.Itoa(ceilSeconds(wait)))
}

func ceilSeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }

// anonymousCaller is the caller of a request without a valid credential: its client address. An
// IPv6 client is its /64, the block a single host usually holds, so that it cannot take a new
// bucket with each address of its block.
func anonymousCaller(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
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
