package main

import (
	"testing"

	"github.com/google/pprof/profile"

	"usersd/bench/internal/layers"
)

func TestASampleBelongsToTheFirstFrameInALayer(t *testing.T) {
	stack := func(names ...string) *profile.Sample {
		s := &profile.Sample{}
		for _, n := range names {
			s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: n}}}})
		}
		return s
	}
	for _, c := range []struct {
		sample *profile.Sample
		want   string
	}{
		// An allocation counts for the layer that asked for it.
		{stack("runtime.mallocgc", "strings.(*Builder).grow", "usersd/auth.(*Keys).Check", "usersd/handlers.(*authorizer).require.func1", "net/http.(*conn).serve"), "usersd: auth"},
		{stack("runtime.memmove", "usersd/auth.(*Limiter).Allow", "usersd/handlers.(*authorizer).require.func1"), "usersd: rate limit"},
		{stack("internal/runtime/syscall.Syscall6", "syscall.write", "internal/poll.(*FD).Write", "net.(*conn).Write", "net/http.(*response).finishRequest"), "I/O system calls (network, and the access log's writes)"},
		{stack("internal/runtime/syscall.Syscall6", "syscall.Syscall6", "modernc.org/libc.___syscall_cp", "modernc.org/libc.Xfsync", "modernc.org/sqlite/lib.unixSync"), "store: file system calls (SQLite's writes and syncs)"},
		{stack("memeqbody", "type:.eq.usersd/handlers.key", "usersd/handlers.(*routeTable).lookup"), "usersd: routes and REST handlers"},
		{stack("runtime.gcDrain", "runtime.gcBgMarkWorker"), layers.Runtime},
		{stack("runtime.mallocgc", "github.com/some/lib/v2.(*T).Do", "usersd/handlers.withObservation.func1"), "other: github.com/some/lib/v2"},
		{stack("runtime.mallocgc", "encoding/json.Marshal", "main.main.func1", "net/http.HandlerFunc.ServeHTTP"), "codec (JSON, protobuf)"},
	} {
		if got := sampleLayer(c.sample); got != c.want {
			t.Errorf("%s: %q, want %q", c.sample.Location[0].Line[0].Function.Name, got, c.want)
		}
	}
}
