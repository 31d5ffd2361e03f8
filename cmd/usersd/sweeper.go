// The sweeper of what the store keeps for a day only: idempotency records and the change log.
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

// sweepExpired deletes idempotency records older than store.RequestTTL and changes older than
// store.EventTTL every interval, until ctx ends. Expired records are already ignored by requests,
// and a change is kept at least its TTL; this only reclaims their space.
func sweepExpired(ctx context.Context, st store.Store, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		sweepInBatches(ctx, "expired idempotency records", sweepBatch, st.DeleteExpiredRequests, logger)
		sweepInBatches(ctx, "expired user changes", sweepBatch, st.DeleteExpiredUserEvents, logger)
	}
}

// sweepInBatches calls deleteBatch with batch until a batch deletes less than a whole one.
func sweepInBatches(ctx context.Context, what string, batch int, deleteBatch func(context.Context, int) (int, error), logger *slog.Logger) {
	total := 0
	for ctx.Err() == nil {
		n, err := deleteBatch(ctx, batch)
		total += n
		if err != nil {
			logger.Warn("sweeping "+what+" failed; retrying at the next sweep", "error", err)
			break
		}
		if n < batch {
			break
		}
	}
	if total > 0 {
		logger.Info("swept "+what, "deleted", total)
	}
}
