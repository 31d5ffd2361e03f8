package main

import (
	"fmt"
	"net/url"
	"strings"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/seeded"
	"usersd/store"
)

// The scale scenarios: the same requests at 1,000, 1,000,000 and 10,000,000 users on SQLite and on
// PostgreSQL (bench/run --sizes and --backends), each compared with itself at 1,000 users.

// Query strings of the list scenarios.
const (
	sortedQuery = "sort=-createdAt&limit=20"
	cursorQuery = "sort=-createdAt&limit=20&cursor={cursor}" // {cursor}: a page token from prepareCursor
	pageSize    = 20
)

var searchQuery = "namePrefix=" + url.PathEscape(fixture.SearchPrefixes[0]) + "&limit=20"

// spreadIDs is how many distinct users GET /users/{id} asks for on large data sets, spread evenly
// over the whole collection: ten times usersd's in-process user cache on SQLite (10,000), so that
// most reads reach the database, as they would with real traffic on a large collection.
const spreadIDs = 100_000

// scaleID names a scale scenario: the kind, the size, and "-pg" on PostgreSQL (the SQLite ids are
// the ones bench/run always had).
func scaleID(kind string, n int, b backend) string {
	id := kind + "-" + seeded.SizeName(n)
	if b == postgres {
		id += "-pg"
	}
	return id
}

// deepPage is the page number about halfway through n users in pages of 20.
func deepPage(n int) int { return max(1, n/pageSize/2) }

// scaleScenarios are the scale scenarios for n users on b, in the order a round runs them.
func scaleScenarios(n int, b backend) []scenario {
	size := fmt.Sprintf("%s users, %s", fmtCount(float64(n)), b.label())
	list := func(query string) wrkLoad { return wrkLoad{conns: 16, path: "/users?" + query} }
	pageQuery := fmt.Sprintf("page=%d&limit=20", deepPage(n))
	ids, step := min(n, spreadIDs), max(1, n/spreadIDs)
	// againstSmall compares a scenario with itself at 1,000 users; the scenarios at 1,000 have none.
	againstSmall := func(kind string, target float64, note string) []comparison {
		if n == thousand {
			return nil
		}
		return []comparison{{against: scaleID(kind, thousand, b), byLatency: true, target: target, note: note}}
	}
	scenarios := []scenario{
		{id: scaleID("list-sorted", n, b), label: "usersd GET /users?" + sortedQuery + ", " + size,
			load: list(sortedQuery), check: checkTotal(sortedQuery, wantNewest), compares: againstSmall("list-sorted", 2, "")},
		{id: scaleID("list-role", n, b), label: "usersd GET /users?" + roleQuery + ", " + size,
			load: list(roleQuery), check: checkTotal(roleQuery, wantRolePage), compares: againstSmall("list-role", 2, "")},
		{id: scaleID("list-search", n, b), label: "usersd GET /users?" + searchQuery + ", " + size,
			load: list(searchQuery), check: checkTotal(searchQuery, wantSearch), compares: againstSmall("list-search", 2, "")},
		{id: scaleID("list-cursor", n, b), label: fmt.Sprintf("usersd GET /users?%s after page %d, %s", strings.TrimSuffix(cursorQuery, "{cursor}")+"…", deepPage(n), size),
			load: list(cursorQuery), prepare: prepareCursor, check: checkTotal(cursorQuery, wantCursorPage),
			compares: append(againstSmall("list-cursor", 2, ""), comparison{against: scaleID("list-sorted", n, b), byLatency: true, target: 2})},
		// 4 connections, not 16: a page number halfway through ten million users costs about a second
		// of PostgreSQL's CPU, so 16 requests queued would near usersd's 10 s request deadline and
		// few would finish in a --quick run. The 1,000-user run uses 4 too, for a like-for-like ratio.
		{id: scaleID("list-page", n, b), label: "usersd GET /users?" + pageQuery + ", " + size,
			load: wrkLoad{conns: 4, path: "/users?" + pageQuery}, check: checkTotal(pageQuery, wantDeepPage),
			compares: againstSmall("list-page", 0, "no target: a page number costs what it skips; the cursor is the fast way deep")},
		{id: scaleID("get", n, b), label: fmt.Sprintf("usersd GET /users/{id}, %s ids 1..%s, %s", fmtCount(float64(ids)), fmtCount(float64(ids*step)), size),
			load: wrkLoad{conns: 16, path: "/users/{id}", ids: ids, step: step}, check: checkSpreadUser(ids * step),
			compares: againstSmall("get", 2, "")},
	}
	scenarios = append(scenarios, filterScenarios(n, b, size, againstSmall)...)
	scenarios = append(scenarios, scimScenarios(n, b, size, againstSmall)...)
	if n == thousand {
		scenarios = append(scenarios, scenario{id: scaleID("create", n, b), label: "usersd REST POST /users (with key), 16 conns, on a fresh " + size,
			load: createLoad(16), check: checkTotal("limit=1", wantOneOfAll), creates: true})
	}
	for i := range scenarios {
		scenarios[i].server, scenarios[i].backend, scenarios[i].users = usersd, b, n
	}
	return scenarios
}

// summaryOf is what the data set of a run holds.
type summaryOf = seeded.Result

// wantOneOfAll: a page of one user, and the total of every user (the create scenarios).
func wantOneOfAll(_ *runner, s summaryOf) listWant {
	return listWant{total: s.Users, items: min(1, s.Users)}
}

// wantNewest: the first page newest first is the 20 users with the latest createdAt (ties by id).
func wantNewest(r *runner, s summaryOf) listWant {
	return listWant{total: s.Users, items: min(pageSize, s.Users), ids: r.memo("newest", s.Users, func() []int32 { return fixture.NewestIDs(s.Users, pageSize) })}
}

// wantRolePage: page 5 of the role is its users 81..100 in id order.
func wantRolePage(r *runner, s summaryOf) listWant {
	total := s.Roles[roleName]
	skip := (rolePage - 1) * pageSize
	ids := r.memo("role", s.Users, func() []int32 {
		return fixture.FirstIDs(s.Users, skip, pageSize, func(u fixture.User) bool { return u.Role == roleName })
	})
	return listWant{total: total, items: len(ids), ids: ids}
}

// wantSearch: the first page of the search is its first 20 matches in id order.
func wantSearch(r *runner, s summaryOf) listWant {
	prefix := fixture.SearchPrefixes[0]
	ids := r.memo("search", s.Users, func() []int32 {
		return fixture.FirstIDs(s.Users, 0, pageSize, func(u fixture.User) bool { return fixture.MatchesPrefix(store.NameKey(u.Name), prefix) })
	})
	return listWant{total: s.Prefixes[prefix], items: len(ids), ids: ids}
}

// wantDeepPage: page p in the default order (by id) holds ids (p-1)*20+1 .. p*20.
func wantDeepPage(r *runner, s summaryOf) listWant {
	first := (deepPage(s.Users) - 1) * pageSize
	var ids []int32
	for id := first + 1; id <= min(first+pageSize, s.Users); id++ {
		ids = append(ids, int32(id))
	}
	return listWant{total: s.Users, items: len(ids), ids: ids}
}

// wantCursorPage: the page after the token is the page that prepareCursor read by number.
func wantCursorPage(r *runner, s summaryOf) listWant {
	return listWant{total: s.Users, items: pageSize, ids: r.cursorIDs}
}
