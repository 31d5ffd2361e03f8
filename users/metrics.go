// What the service reports for its metrics: a small interface, so that the rules know nothing of
// the metrics library, and the HTTP face, which owns the service's collectors, implements it.
package users

// Metrics counts what the service decides. Every method must be safe for concurrent use.
type Metrics interface {
	// IdempotentReplay counts a create answered with the kept answer of an earlier request.
	IdempotentReplay()
	// IdempotencyKeyRefused counts a create refused for its idempotency key: reason in_progress or
	// reused.
	IdempotencyKeyRefused(reason string)
	// WatchStarted and WatchEnded count the open watches.
	WatchStarted()
	WatchEnded()
	// EventsSent counts changes sent to one watcher, heartbeats not included.
	EventsSent(n int)
	// WatchCut counts a watch that the service refused or ended: reason too_many, too_slow or
	// stopping.
	WatchCut(reason string)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) IdempotentReplay()            {}
func (noMetrics) IdempotencyKeyRefused(string) {}
func (noMetrics) WatchStarted()                {}
func (noMetrics) WatchEnded()                  {}
func (noMetrics) EventsSent(int)               {}
func (noMetrics) WatchCut(string)              {}
