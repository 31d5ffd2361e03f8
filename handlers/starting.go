// What the server answers before the service exists: while it waits for its database at start.
package handlers

import "net/http"

// startingMessage is what every route but the probes answers while the database is awaited.
const startingMessage = "the service is starting: its database does not answer yet; retry shortly"

// Starting answers while the process waits for its database at start: /livez is 200 (the process
// is alive, and a liveness probe must not restart it for its database), /readyz and /health are
// 503, and every other request is 503 {"error"} with Retry-After, which RPC clients read as
// unavailable.
func Starting() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /livez", livezREST())
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { writeHealth(w, false) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", "1")
		writeUnavailableJSON(w, startingMessage)
	})
	return mux
}
