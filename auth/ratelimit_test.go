package auth

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestTheRateLimiterKeepsABoundedNumberOfCallers: a million callers (an attacker with a million
// addresses) leave at most about the bound of buckets; and 100,000 callers, the default bound,
// hold at most 32 MiB of heap.
func TestTheRateLimiterKeepsABoundedNumberOfCallers(t *testing.T) {
	l := newLimiter(10, 20, 1000)
	now := time.Now()
	for i := range 1_000_000 {
		l.take("address 10."+strconv.Itoa(i>>16)+"."+strconv.Itoa(i>>8&255)+"."+strconv.Itoa(i&255), now)
	}
	if n := l.size(); n > 1000 {
		t.Fatalf("%d buckets kept for a bound of 1000", n)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l = newLimiter(10, 20, maxRateCallers)
	for i := range maxRateCallers {
		l.take("address 2001:db8:"+strconv.FormatInt(int64(i), 16)+"::/64", now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d callers hold %.1f MiB (%d bytes each)", l.size(), float64(held)/(1<<20), held/int64(l.size()))
	if held > 32<<20 {
		t.Errorf("%d callers hold %d MiB, want at most 32", l.size(), held>>20)
	}
	runtime.KeepAlive(l)
}

// size reports how many buckets l keeps.
func (l *Limiter) size() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].buckets)
		l.shards[i].mu.Unlock()
	}
	return n
}
