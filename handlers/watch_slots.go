// Fair shares of the watches: the service allows so many watches in all (users.Options.MaxWatchers),
// and one client could otherwise take every one of them. Caps per client address and per
// connection leave room for everyone else.
package handlers

import (
	"net"
	"net/http"
	"sync"

	"connectrpc.com/connect"
)

// The caps of cmd/usersd's flags. A connection carries one client's streams; an address may be a
// household or an office behind one NAT, so it gets ten connections' worth.
const (
	DefaultWatchersPerConnection = 100
	DefaultWatchersPerAddress    = 1000
)

// watchSlots counts the watches open from each client address and on each connection.
type watchSlots struct {
	perAddress, perConnection int // 0: no cap

	mu           sync.Mutex
	byAddress    map[string]int
	byConnection map[string]int
}

func newWatchSlots(perAddress, perConnection int) *watchSlots {
	return &watchSlots{perAddress: perAddress, perConnection: perConnection,
		byAddress: map[string]int{}, byConnection: map[string]int{}}
}

// take holds a slot for r's watch, or refuses it with resource_exhausted / 429 if its address or
// its connection has as many as it may; release gives the slot back. A request's RemoteAddr is its
// connection's (the client's port tells connections apart); behind a proxy every client has the
// proxy's address, so the per-address cap must then be raised or turned off.
func (s *watchSlots) take(r *http.Request) (release func(), err error) {
	connection := r.RemoteAddr
	address, _, splitErr := net.SplitHostPort(connection)
	if splitErr != nil {
		address = connection
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perConnection > 0 && s.byConnection[connection] >= s.perConnection:
		return nil, newHTTPError(http.StatusTooManyRequests, connect.CodeResourceExhausted, reasonTooManyWatchers,
			"this connection has %d watches open, as many as one connection may; close one or open another connection", s.perConnection)
	case s.perAddress > 0 && s.byAddress[address] >= s.perAddress:
		return nil, newHTTPError(http.StatusTooManyRequests, connect.CodeResourceExhausted, reasonTooManyWatchers,
			"your address has %d watches open, as many as one address may; close one first", s.perAddress)
	}
	s.byConnection[connection]++
	s.byAddress[address]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		decrement(s.byConnection, connection)
		decrement(s.byAddress, address)
	}, nil
}

// decrement lowers a count, forgetting a key at zero so that the maps hold open watches only.
func decrement(counts map[string]int, key string) {
	if counts[key] <= 1 {
		delete(counts, key)
		return
	}
	counts[key]--
}

// limitWatches serves h, a stream route, only for a watch that gets a slot.
func limitWatches(slots *watchSlots, errs *errorWriter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := slots.take(r)
		if err != nil {
			errs.write(w, r, err)
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}
