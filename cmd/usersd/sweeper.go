// The sweeper of expired idempotency records.
package main

import (
	"context"
	"log/slog"
	"time"

	"usersd/store"
)

const (
	sweepInterval = 10 * time.Minute
	// sweepBatch keeps each delete short: on SQLite every write waits for the one writer, so a
	// single delete of a day's records could hold requests up; many small ones do not.
	sweepBatch = 500
)

// sweepExpiredRequests deletes idempotency records older than store.RequestTTL every interval,
// until ctx ends. Expired records are already ignored by requests; this only reclaims their space.
func sweepExpiredRequests(ctx context.Context, st store.Store, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		total := 0
		for ctx.Err() == nil {
			n, err := st.DeleteExpiredRequests(ctx, sweepBatch)
			total += n
			if err != nil {
				logger.Warn("sweeping expired idempotency records failed; retrying at the next sweep", "error", err)
				break
			}
			if n < sweepBatch {
				break
			}
		}
		if total > 0 {
			logger.Info("swept expired idempotency records", "deleted", total)
		}
	}
}
