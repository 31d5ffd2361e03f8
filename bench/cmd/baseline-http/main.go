// Command baseline-http is the ceiling for a net/http JSON route: GET /users/{id} answered from a
// map with encoding/json, and nothing else (no middleware, no store, no logging). It holds the same
// users as the benchmark's usersd and answers the same JSON body and ETag.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/profiler"
)

// user is the JSON form of a user as usersd writes it (the protojson form of users.v1.User).
type user struct {
	ID        int32     `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	ETag      string    `json:"etag"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	n := flag.Int("users", 1000, "number of users in the map")
	admin := flag.String("admin-addr", "", "serve Go's profiler on this address (bench/run --profile)")
	flag.Parse()
	profiler.Serve(*admin)

	users := make(map[int32]*user, *n)
	for _, u := range fixture.All(*n) {
		users[u.ID] = &user{ID: u.ID, Name: u.Name, Role: u.Role, CreatedAt: u.CreatedAt, UpdatedAt: u.CreatedAt, ETag: fixture.ETag(u.Version)}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
		u, ok := users[int32(id)]
		if err != nil || !ok {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", u.ETag)
		json.NewEncoder(w).Encode(u)
	})

	l, err := fixture.Listen(*addr, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(l, mux))
}
