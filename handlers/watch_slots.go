// Fair shares of the watches (package watchslots), on the stream routes.
package handlers

import (
	"net/http"

	"connectrpc.com/connect"

	"usersd/handlers/apierror"
	"usersd/handlers/watchslots"
)

// The caps of cmd/usersd's flags. A connection carries one client's streams; an address may be a
// household or an office behind one NAT, so it gets ten connections' worth.
const (
	DefaultWatchersPerConnection = 100
	DefaultWatchersPerAddress    = 1000
)

// limitWatches serves h, a stream route, only for a watch that gets a slot; a refused one is
// resource_exhausted / 429.
func limitWatches(slots *watchslots.Slots, errs *errorWriter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := slots.Take(r)
		if err != nil {
			errs.write(w, r, apierror.New(http.StatusTooManyRequests, connect.CodeResourceExhausted, apierror.ReasonTooManyWatchers, "%s", err))
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}
