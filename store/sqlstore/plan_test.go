package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// planUsers is how many users the plan tests fill in: enough that a planner weighing a scan against
// an index prefers the index for a page, as it does at ten million (on a few rows, PostgreSQL rightly
// reads the whole table). The roles are skewed like real data: one role holds most users.
const planUsers = 20_000

// planQueries are the list queries the API allows, in every shape the store builds: each sort in
// both directions and a few combinations, with and without the role filter and the name search, on
// the first page, on a cursor page and on a page number, each without and with deleted users.
func planQueries() []store.UserQuery {
	sorts := [][]store.SortKey{nil}
	for _, field := range []store.SortField{store.SortByID, store.SortByName, store.SortByRole, store.SortByCreatedAt} {
		sorts = append(sorts, []store.SortKey{{Field: field}}, []store.SortKey{{Field: field, Descending: true}})
	}
	sorts = append(sorts,
		[]store.SortKey{{Field: store.SortByRole}, {Field: store.SortByName, Descending: true}},
		[]store.SortKey{{Field: store.SortByRole, Descending: true}, {Field: store.SortByCreatedAt}},
	)
	cursor := &store.UserCursor{ID: planUsers / 2, Name: "user 10000", Role: "viewer", CreatedAt: time.UnixMicro(planUsers / 2), UserName: "user10000"}
	filters := []store.UserQuery{{}, {Role: "editor"}, {NamePrefix: "user 12"}, {Role: "editor", NamePrefix: "user 12"}}
	var qs []store.UserQuery
	for _, sort := range sorts {
		qs = append(qs, planPages(sort, filters, cursor)...)
	}
	// A sort by user name is served without the role filter and the name search only (SCIM's lists).
	for _, descending := range []bool{false, true} {
		qs = append(qs, planPages([]store.SortKey{{Field: store.SortByUserName, Descending: descending}}, filters[:1], cursor)...)
	}
	return qs
}

// planPages are the queries of sort with each filter, on the first page, on a cursor page and on a
// page number, each without and with deleted users.
func planPages(sort []store.SortKey, filters []store.UserQuery, cursor *store.UserCursor) []store.UserQuery {
	var qs []store.UserQuery
	for _, filter := range filters {
		for _, paging := range []store.UserQuery{{}, {After: cursor}, {Offset: 200}} {
			for _, showDeleted := range []bool{false, true} {
				q := filter
				q.Sort, q.After, q.Offset, q.Limit, q.ShowDeleted = sort, paging.After, paging.Offset, 20, showDeleted
				qs = append(qs, q)
			}
		}
	}
	return qs
}

func describeQuery(q store.UserQuery) string {
	var sort []string
	for _, k := range q.Sort {
		sort = append(sort, map[bool]string{true: "-"}[k.Descending]+string(k.Field))
	}
	return fmt.Sprintf("sort=%s role=%q namePrefix=%q cursor=%v offset=%d showDeleted=%v",
		strings.Join(sort, ","), q.Role, q.NamePrefix, q.After != nil, q.Offset, q.ShowDeleted)
}

// planStatements are the statements ListUsers runs for q, as it runs them.
func planStatements(t *testing.T, s *Store, q store.UserQuery) []statement {
	t.Helper()
	reads, err := s.dialect.pageReads(q)
	if err != nil {
		t.Fatal(err)
	}
	count, err := s.dialect.countStatement(q)
	if err != nil {
		t.Fatal(err)
	}
	statements := []statement{count}
	for _, r := range reads {
		statements = append(statements, r.limited(q.Limit+1))
	}
	return statements
}

func TestSQLiteListQueriesSeekAnIndex(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Filled in one statement; the role mix is 5% admin, 20% editor, 60% viewer, 15% none, and
	// planDeleted of the users are deleted.
	if _, err := s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
		INSERT INTO users (name, name_key, role, created_at, updated_at, delete_time, purge_time, user_name, user_name_key)
		SELECT 'user ' || i, 'USER ' || i,
			CASE WHEN i % 20 = 0 THEN 'admin' WHEN i % 5 = 1 THEN 'editor' WHEN i % 20 IN (2, 3, 4) THEN '' ELSE 'viewer' END,
			i, i, `+planDeleted+`, `+planUserName+` FROM n`, planUsers); err != nil {
		t.Fatal(err)
	}
	for _, q := range planQueries() {
		for _, st := range planStatements(t, s, q) {
			details := sqlitePlan(t, s, st)
			if why := sqlitePlanProblem(q, details); why != "" {
				t.Errorf("%s\n%s\nplan %q: %s", describeQuery(q), st.query, details, why)
			}
		}
	}
	due := sqlitePlan(t, s, dueUsersStatement)
	if !slices.ContainsFunc(due, func(d string) bool {
		return strings.HasPrefix(d, "SEARCH users USING") && strings.Contains(d, "INDEX users_purge_time (purge_time")
	}) ||
		slices.ContainsFunc(due, func(d string) bool { return strings.Contains(d, "TEMP B-TREE") }) {
		t.Errorf("%s\nplan %q: does not read the due users from the purge index in order", dueUsersStatement.query, due)
	}
}

// planDeleted are the delete and purge times of the plan tests' users, in SQL over i, the user's
// number: one user in fifty is deleted, and the purge times spread over every user's range, so that
// some are due at dueUsersStatement's time and most are not.
const planDeleted = `CASE WHEN i % 50 = 7 THEN i END, CASE WHEN i % 50 = 7 THEN i + 1000 END`

// planUserName is the user name and its key of the plan tests' users: one in ten has none, as users
// made through REST without one, which ties in a sort by user name.
const planUserName = `CASE WHEN i % 10 = 3 THEN '' ELSE 'user' || i END, CASE WHEN i % 10 = 3 THEN '' ELSE 'USER' || i END`

// dueUsersStatement is PurgeExpired's read of the users due, at a time when a tenth of the deleted
// users are due.
var dueUsersStatement = statement{query: dueUsersQuery, args: []any{planUsers / 10, 100}}

// sqlitePlan is the detail column of SQLite's EXPLAIN QUERY PLAN for st.
func sqlitePlan(t *testing.T, s *Store, st statement) []string {
	t.Helper()
	rows, err := s.reader.Query(`EXPLAIN QUERY PLAN `+st.query, st.args...)
	details, err := rowsOf(rows, err, func(row scanner) (string, error) {
		var id, parent, unused int
		var detail string
		return detail, row.Scan(&id, &parent, &unused, &detail)
	})
	if err != nil {
		t.Fatalf("explain %s: %v", st.query, err)
	}
	return details
}

// postgresPlan is the root of PostgreSQL's EXPLAIN (FORMAT JSON) for st, and the JSON itself.
func postgresPlan(t *testing.T, s *Store, st statement) (pgPlanNode, []byte) {
	t.Helper()
	var plan []struct{ Plan pgPlanNode }
	var raw []byte
	if err := s.reader.QueryRow(`EXPLAIN (FORMAT JSON) `+st.query, st.args...).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", st.query, err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("EXPLAIN answered %s: %v", raw, err)
	}
	return plan[0].Plan, raw
}

// sqlitePlanProblem says what is wrong with a plan of SQLite's EXPLAIN QUERY PLAN for q, or "".
func sqlitePlanProblem(q store.UserQuery, details []string) string {
	for _, d := range details {
		switch {
		case d == "SCAN users" && (q.Role != "" || q.NamePrefix != ""):
			// Without a filter, this is a walk in id (rowid) order that the LIMIT stops.
			return "reads the whole table and filters it"
		case d == "USE TEMP B-TREE FOR ORDER BY" && q.NamePrefix == "":
			return "sorts every match: no index is in the order of the sort"
		case strings.HasPrefix(d, "SCAN users USING") && (q.Role != "" || q.NamePrefix != ""):
			return "walks a whole index and filters it: the filter does not seek"
		case strings.HasPrefix(d, "SEARCH users") && q.NamePrefix != "" && !strings.Contains(d, "name_key>?"):
			return "a name search that does not seek its range of name keys"
		}
	}
	return ""
}

func TestPostgresListQueriesSeekAnIndex(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	s, err := Open(context.Background(), storetest.PostgresSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.writer.Exec(`INSERT INTO users (name, name_key, role, created_at, updated_at, delete_time, purge_time, user_name, user_name_key)
		SELECT 'user ' || i, 'USER ' || i,
			CASE WHEN i % 20 = 0 THEN 'admin' WHEN i % 5 = 1 THEN 'editor' WHEN i % 20 IN (2, 3, 4) THEN '' ELSE 'viewer' END,
			i, i, `+planDeleted+`, `+planUserName+` FROM generate_series(1, $1::int) AS i`, planUsers); err != nil {
		t.Fatal(err)
	}
	// What autovacuum does soon after a bulk load; the plans of a live database are made with it.
	if _, err := s.writer.Exec(`VACUUM ANALYZE users`); err != nil {
		t.Fatal(err)
	}
	for _, q := range planQueries() {
		for _, st := range planStatements(t, s, q) {
			plan, raw := postgresPlan(t, s, st)
			if why := postgresPlanProblem(q, plan, false); why != "" {
				t.Errorf("%s\n%s\nplan %s: %s", describeQuery(q), st.query, raw, why)
			}
		}
	}
	// As PurgeExpired runs it, rows locked.
	due := statement{query: dueUsersStatement.query + s.dialect.forUpdate, args: dueUsersStatement.args}
	if plan, raw := postgresPlan(t, s, due); !usesIndex(plan, "users_purge_time") || postgresPlanProblem(store.UserQuery{}, plan, false) != "" {
		t.Errorf("%s\nplan %s: does not read the due users from the purge index in order", due.query, raw)
	}
}

// usesIndex reports whether the plan rooted at n reads the index named index.
func usesIndex(n pgPlanNode, index string) bool {
	if n.Index == index {
		return true
	}
	return slices.ContainsFunc(n.Plans, func(child pgPlanNode) bool { return usesIndex(child, index) })
}

// pgPlanNode is the part of a node of EXPLAIN (FORMAT JSON) that the check reads.
type pgPlanNode struct {
	NodeType string       `json:"Node Type"`
	Relation string       `json:"Relation Name"`
	Index    string       `json:"Index Name"`
	Plans    []pgPlanNode `json:"Plans"`
}

// postgresPlanProblem says what is wrong with the plan rooted at n for q, or "". limited says whether
// a Limit above n stops it early.
func postgresPlanProblem(q store.UserQuery, n pgPlanNode, limited bool) string {
	switch {
	case n.NodeType == "Seq Scan" && n.Relation == "users":
		return "reads the whole table"
	case n.NodeType == "Sort" && q.NamePrefix == "":
		return "sorts every match: no index is in the order of the sort"
	case strings.HasPrefix(n.NodeType, "Bitmap Heap Scan") && n.Relation == "users" && q.NamePrefix == "":
		return "reads the matches in no order"
	case q.NamePrefix != "" && n.Relation == "users" && !seeksNameKeys(n) && !limited:
		return "a name search that does not seek its range of name keys"
	}
	limited = limited || n.NodeType == "Limit"
	for _, child := range n.Plans {
		if why := postgresPlanProblem(q, child, limited); why != "" {
			return why
		}
	}
	return ""
}

// seeksNameKeys reports whether n reads users by a name_key index: itself (an index or index-only
// scan), or, for a bitmap heap scan, through the bitmap index scans below it. Which of the two the
// planner takes depends on how much of the table VACUUM could mark all-visible, and so on what
// other transactions were open at the time: both seek the range.
func seeksNameKeys(n pgPlanNode) bool {
	if strings.Contains(n.Index, "name_key") {
		return true
	}
	if !strings.HasPrefix(n.NodeType, "Bitmap") { // Bitmap Heap Scan, Bitmap Index Scan, BitmapAnd, BitmapOr
		return false
	}
	for _, child := range n.Plans {
		if seeksNameKeys(child) {
			return true
		}
	}
	return false
}

func TestPlanQueriesCoverEveryShape(t *testing.T) {
	// The plan tests are only as good as their list of queries: it must hold every sort attribute
	// in both directions with each filter and each kind of paging.
	seen := map[string]bool{}
	for _, q := range planQueries() {
		seen[describeQuery(q)] = true
	}
	everyFilter := []string{`role="" namePrefix=""`, `role="editor" namePrefix=""`, `role="" namePrefix="user 12"`}
	for _, field := range []string{"id", "name", "role", "createdAt", "userName"} {
		filters := everyFilter
		if field == "userName" {
			filters = filters[:1]
		}
		for _, sort := range []string{field, "-" + field} {
			for _, filter := range filters {
				for _, paging := range []string{"cursor=false offset=0", "cursor=true offset=0", "cursor=false offset=200"} {
					for _, deleted := range []string{"showDeleted=false", "showDeleted=true"} {
						if key := "sort=" + sort + " " + filter + " " + paging + " " + deleted; !seen[key] {
							t.Errorf("no plan query %s", key)
						}
					}
				}
			}
		}
	}
	if !slices.ContainsFunc(planQueries(), func(q store.UserQuery) bool { return len(q.Sort) > 1 }) {
		t.Error("no plan query sorts by several attributes")
	}
}

// eventStatements are the statements that read the change log, with arguments from the middle of a
// log of planUsers changes.
var eventStatements = []statement{
	{query: readEventsQuery, args: []any{planUsers / 2, 500}},
	{query: oldestEventsQuery, args: []any{500}},
	{query: forgetNameStatement, args: []any{planUsers / 2}},
}

// forgetNameStatement is what the trigger of a delete runs on the log (migrations 0011 on
// PostgreSQL, 0007 on SQLite): it must find the user's changes by the user_id index, not read the
// whole log.
const forgetNameStatement = `UPDATE user_events SET name = '' WHERE user_id = $1 AND name <> ''`

func TestSQLiteChangeLogStatementsSeekAnIndex(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
		INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
		SELECT 1, i, 'user ' || i, '', '', i, i, 1, i FROM n`, planUsers); err != nil {
		t.Fatal(err)
	}
	for _, st := range eventStatements {
		details := sqlitePlan(t, s, st)
		for _, d := range details {
			// "SCAN user_events" alone is a walk in sequence (rowid) order that the LIMIT stops.
			if strings.HasPrefix(d, "SCAN user_events USING") || strings.Contains(d, "TEMP B-TREE") && !strings.Contains(d, "user_events_swept") {
				t.Errorf("%s\nplan %q: does not walk the primary key in order", st.query, details)
			}
			if d == "SCAN user_events" && st.query != oldestEventsQuery {
				t.Errorf("%s\nplan %q: reads the log from its start instead of seeking the sequence", st.query, details)
			}
		}
	}
}

func TestPostgresChangeLogStatementsSeekAnIndex(t *testing.T) {
	s, err := Open(context.Background(), storetest.PostgresSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.writer.Exec(`INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
		SELECT 1, i, 'user ' || i, '', '', i, i, 1, i FROM generate_series(1, $1::int) AS i`, planUsers); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.Exec(`VACUUM ANALYZE user_events`); err != nil {
		t.Fatal(err)
	}
	for _, st := range eventStatements {
		plan, raw := postgresPlan(t, s, st)
		if why := changeLogPlanProblem(plan); why != "" {
			t.Errorf("%s\nplan %s: %s", st.query, raw, why)
		}
	}
}

// changeLogPlanProblem says what is wrong with a PostgreSQL plan of a change log statement, or "".
func changeLogPlanProblem(n pgPlanNode) string {
	switch {
	case n.Relation == "user_events" && !strings.HasPrefix(n.NodeType, "Index") && !strings.HasPrefix(n.NodeType, "Bitmap") && n.NodeType != "ModifyTable":
		return "reads the log other than by its primary key: " + n.NodeType
	case n.NodeType == "Sort":
		return "sorts the log"
	}
	for _, child := range n.Plans {
		if why := changeLogPlanProblem(child); why != "" {
			return why
		}
	}
	return ""
}
