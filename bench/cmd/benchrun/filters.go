package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"usersd/bench/internal/fixture"
)

// The filter scenarios: one list per shape of filter that the README says an index serves (and the
// shapes it says scan), at each size and backend, each compared with itself at 1,000 users. Every
// answer is checked: its exact total, and the first page in its order (by id, or by createdAt for
// the shapes whose index gives that order).

// filterShape is one filter of the scale run. The filter's literal is made for n users, mostly
// around the middle user, so that ranges hold half the users.
type filterShape struct {
	kind   string
	filter func(mid fixture.User) string
	keep   func(u, mid fixture.User) bool
	// scans is why the shape reads more than its page (no 2x target then); "" for none.
	scans string
	conns int // 0 for 16
	// byCreated sorts the page by createdAt (ties by id), the order of a created_at range's index;
	// the other shapes keep the default order, by id.
	byCreated bool
}

// rfc3339 writes a time as the filter's timestamp literal.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

var filterShapes = []filterShape{
	{kind: "filter-email",
		filter: func(mid fixture.User) string { return fmt.Sprintf(`email = "%s"`, strings.ToUpper(mid.Email())) },
		keep:   func(u, mid fixture.User) bool { return u.ID == mid.ID }},
	{kind: "filter-external-id",
		filter: func(mid fixture.User) string { return fmt.Sprintf(`external_id = "%s"`, mid.ExternalID()) },
		keep:   func(u, mid fixture.User) bool { return u.ID == mid.ID }},
	{kind: "filter-id-range",
		filter: func(mid fixture.User) string { return fmt.Sprintf(`id > %d`, mid.ID) },
		keep:   func(u, mid fixture.User) bool { return u.ID > mid.ID }},
	{kind: "filter-created-range", byCreated: true,
		filter: func(mid fixture.User) string { return fmt.Sprintf(`created_at >= "%s"`, rfc3339(mid.CreatedAt)) },
		keep:   func(u, mid fixture.User) bool { return !u.CreatedAt.Before(mid.CreatedAt.Truncate(time.Second)) }},
	{kind: "filter-created-range-by-id",
		filter: func(mid fixture.User) string { return fmt.Sprintf(`created_at >= "%s"`, rfc3339(mid.CreatedAt)) },
		keep:   func(u, mid fixture.User) bool { return !u.CreatedAt.Before(mid.CreatedAt.Truncate(time.Second)) },
		scans:  "a range of one column in the order of another reads every match (README: shapes that scan)", conns: 1},
	{kind: "filter-inactive",
		filter: func(fixture.User) string { return `active = false` },
		keep:   func(u, _ fixture.User) bool { return !u.Active() }},
	{kind: "filter-label",
		filter: func(fixture.User) string { return `labels.team = "infra"` },
		keep:   func(u, _ fixture.User) bool { return u.Team() == "infra" }},
	{kind: "filter-label-key",
		filter: func(fixture.User) string { return `labels:team` },
		keep:   func(u, _ fixture.User) bool { return u.Team() != "" }},
	{kind: "filter-role",
		filter: func(fixture.User) string { return `role = "admin"` },
		keep:   func(u, _ fixture.User) bool { return u.Role == "admin" }},
	{kind: "filter-username-prefix",
		filter: func(fixture.User) string { return `user_name = "user12*"` },
		keep:   func(u, _ fixture.User) bool { return strings.HasPrefix(u.UserName(), "user12") },
		scans:  "total counts the prefix's matches (README: shapes that scan)"},
	{kind: "filter-and", byCreated: true,
		filter: func(mid fixture.User) string {
			return fmt.Sprintf(`role = "admin" AND created_at >= "%s"`, rfc3339(mid.CreatedAt))
		},
		keep: func(u, mid fixture.User) bool {
			return u.Role == "admin" && !u.CreatedAt.Before(mid.CreatedAt.Truncate(time.Second))
		},
		scans: "total counts the matches of an AND (README: shapes that scan)", conns: 4},
}

// midUsers holds the middle user of each size, which every filter's literal is made from: found
// once per size (finding it makes half the users).
var midUsers = map[int]fixture.User{}

// midUser is the middle user of n users.
func midUser(n int) fixture.User {
	if u, ok := midUsers[n]; ok {
		return u
	}
	u, _ := fixture.Find(int32(max(1, n/2)))
	midUsers[n] = u
	return u
}

// filterQuery is the list query of shape s on n users.
func filterQuery(s filterShape, n int) string {
	query := "filter=" + url.QueryEscape(s.filter(midUser(n))) + "&limit=20"
	if s.byCreated {
		query += "&sort=createdAt"
	}
	return query
}

// before reports whether a comes before b in the page of shape s.
func (s filterShape) before(a, b fixture.User) bool {
	if s.byCreated && !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// filterWant is what the list of shape s answers on the current data set: every shape of a size is
// computed in one pass over its users, once per run.
func filterWant(s filterShape) func(*runner, summaryOf) listWant {
	return func(r *runner, data summaryOf) listWant {
		n := data.Users
		if r.filterWants == nil {
			r.filterWants = map[int]map[string]listWant{}
		}
		if wants, ok := r.filterWants[n]; ok {
			return wants[s.kind]
		}
		mid := midUser(n)
		wants := map[string]listWant{}
		pages := map[string][]fixture.User{} // the best pageSize users so far, in the page's order
		for u := range fixture.Users(n) {
			for _, shape := range filterShapes {
				if !shape.keep(u, mid) {
					continue
				}
				w := wants[shape.kind]
				w.total++
				wants[shape.kind] = w
				page := pages[shape.kind]
				if len(page) == pageSize && !shape.before(u, page[pageSize-1]) {
					continue
				}
				i := len(page)
				page = append(page, u)
				for ; i > 0 && shape.before(u, page[i-1]); i-- {
					page[i] = page[i-1]
				}
				page[i] = u
				pages[shape.kind] = page[:min(len(page), pageSize)]
			}
		}
		for kind, page := range pages {
			w := wants[kind]
			for _, u := range page {
				w.ids = append(w.ids, u.ID)
			}
			w.items = len(w.ids)
			wants[kind] = w
		}
		r.filterWants[n] = wants
		return wants[s.kind]
	}
}

// filterScenarios are the filter scenarios for n users on b.
func filterScenarios(n int, b backend, size string, againstSmall func(kind string, target float64, note string) []comparison) []scenario {
	var scenarios []scenario
	for _, s := range filterShapes {
		query := filterQuery(s, n)
		target, conns := 2.0, s.conns
		if s.scans != "" {
			target = 0
		}
		if conns == 0 {
			conns = 16
		}
		unescaped, _ := url.QueryUnescape(query)
		scenarios = append(scenarios, scenario{id: scaleID(s.kind, n, b), label: "usersd GET /users?" + unescaped + ", " + size,
			load: wrkLoad{conns: conns, path: "/users?" + query}, check: checkTotal(query, filterWant(s)),
			compares: againstSmall(s.kind, target, s.scans)})
	}
	return scenarios
}
