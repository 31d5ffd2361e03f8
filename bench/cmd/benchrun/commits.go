package main

import "fmt"

// commitClients are the numbers of connections that the group-commit scenarios create users with.
var commitClients = []int{1, 4, 16, 64}

// commitScenarios are POST /users with the API key at 1, 4, 16 and 64 connections on a fresh copy of
// 1,000 users, on SQLite and PostgreSQL, with group commit (the default -write-batch) and without
// it (-write-batch 1: every create commits alone, as before group commit), each compared with the
// other. Ids: commit-c16 and commit-c16-alone, with -pg on PostgreSQL. At 16 and 64 connections,
// identity-c16 and identity-c64 create users that fill the unique identity fields.
func commitScenarios() []scenario {
	var out []scenario
	for _, b := range []backend{sqlite, postgres} {
		suffix := ""
		if b == postgres {
			suffix = "-pg"
		}
		for _, conns := range commitClients {
			batched := fmt.Sprintf("commit-c%d%s", conns, suffix)
			alone := fmt.Sprintf("commit-c%d-alone%s", conns, suffix)
			label := fmt.Sprintf("usersd REST POST /users (with key), %d conns, %s", conns, b.label())
			// A lone create at 1 connection must not wait for company: compared by latency.
			compare := comparison{against: alone, target: commitTarget(b, conns)}
			if compare.target == 0 {
				compare.note = "no target: the issue sets them at 16 and 64 connections"
			}
			if conns == 1 {
				compare = comparison{against: alone, byLatency: true, target: 1}
			}
			out = append(out,
				scenario{id: alone, label: label + ", each create committed alone (-write-batch 1)", server: usersd, backend: b, users: thousand,
					serverArgs: []string{"-write-batch", "1"},
					load:       createLoad(conns), check: checkTotal("limit=1", wantOneOfAll), creates: true},
				scenario{id: batched, label: label + ", group commit", server: usersd, backend: b, users: thousand,
					load: createLoad(conns), check: checkTotal("limit=1", wantOneOfAll), creates: true,
					compares: []comparison{compare}})
			if conns >= 16 {
				// What the unique indexes of identity cost a create that fills them, against one
				// that leaves them empty (their entries are only for values that are set).
				out = append(out, scenario{id: fmt.Sprintf("identity-c%d%s", conns, suffix),
					label:  label + ", group commit, each create with a unique user name, email and external id",
					server: usersd, backend: b, users: thousand,
					load: identityCreateLoad(conns), check: checkTotal("limit=1", wantOneOfAll), creates: true,
					compares: []comparison{{against: batched, note: "no target: what the unique indexes cost, reported"}}})
			}
		}
	}
	return out
}

// commitTarget is the target for group commit's creates/s against each create alone; 0 is none.
func commitTarget(b backend, conns int) float64 {
	switch {
	case b == sqlite && conns == 16:
		return 8
	case b == sqlite && conns == 64:
		return 10
	case b == postgres && conns == 16:
		return 1.5
	}
	return 0
}
