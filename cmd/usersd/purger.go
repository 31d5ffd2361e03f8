// The purger: deleted users whose purge time has come are removed for good, with their posts.
package main

import (
	"context"
	"log/slog"
	"time"

	"usersd/store"
)

// The purger looks for due users at least every maxPurgeInterval, so that a user goes within a
// minute of its purge time; a short retention (a test's, say) is looked at more often.
const (
	maxPurgeInterval = 20 * time.Second
	minPurgeInterval = time.Second
	// purgeBatch is how many users one transaction purges. A user's posts go with it, however
	// many it has, and on SQLite every other write waits for the transaction: a few users at a
	// time keep that wait short after a mass delete.
	purgeBatch = 4
)

// purgeInterval is how often the purger looks: a quarter of the retention, between the bounds.
func purgeInterval(retention time.Duration) time.Duration {
	return min(max(retention/4, minPurgeInterval), maxPurgeInterval)
}

// purgeDeleted purges the deleted users past their purge time every interval, until ctx ends. On
// PostgreSQL every replica runs it; the store lets one purge at a time, and the others find
// nothing to do (store.Store.PurgeExpired).
func purgeDeleted(ctx context.Context, st store.Store, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		sweepInBatches(ctx, "deleted users past their purge time", purgeBatch, func(ctx context.Context, limit int) (int, error) {
			return st.PurgeExpired(ctx, time.Now(), limit)
		}, logger)
	}
}
