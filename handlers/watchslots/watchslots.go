// Package watchslots shares the watches out fairly: the service allows so many watches in all
// (users.Options.MaxWatchers), and one client could otherwise take every one of them. Caps per
// client address and per connection leave room for everyone else.
package watchslots

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Slots counts the watches open from each client address and on each connection.
type Slots struct {
	perAddress, perConnection int // 0: no cap

	mu           sync.Mutex
	byAddress    map[string]int
	byConnection map[string]int
}

// New returns the slots of the caps, 0 for none.
func New(perAddress, perConnection int) *Slots {
	return &Slots{perAddress: perAddress, perConnection: perConnection,
		byAddress: map[string]int{}, byConnection: map[string]int{}}
}

// Full is the refusal of a watch whose address or connection has as many as it may.
type Full struct{ message string }

func (f Full) Error() string { return f.message }

// Take holds a slot for r's watch, or refuses it with Full if its address or its connection has as
// many as it may; release gives the slot back. A request's RemoteAddr is its connection's (the
// client's port tells connections apart); behind a proxy every client has the proxy's address, so
// the per-address cap must then be raised or turned off.
func (s *Slots) Take(r *http.Request) (release func(), err error) {
	connection := r.RemoteAddr
	address, _, splitErr := net.SplitHostPort(connection)
	if splitErr != nil {
		address = connection
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perConnection > 0 && s.byConnection[connection] >= s.perConnection:
		return nil, Full{fmt.Sprintf("this connection has %d watches open, as many as one connection may; close one or open another connection", s.perConnection)}
	case s.perAddress > 0 && s.byAddress[address] >= s.perAddress:
		return nil, Full{fmt.Sprintf("your address has %d watches open, as many as one address may; close one first", s.perAddress)}
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
