package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// filterPlanColumns fill the identity columns of the plan tests' users, in SQL over i, the user's
// number, for the filter plan tests: every user has a user name, half an email, a third an external
// id, one in a thousand is inactive, a quarter have a team label of a thousand values, and one in five
// thousand has a "vip" label. The cases filter on values that few users have, as a filter that an
// index serves does at ten million users; on a value that most users have, walking the sort order
// and testing each user is the better plan, and the planners rightly take it.
const filterPlanColumns = `'u' || i, 'U' || i,
	CASE WHEN i % 2 = 0 THEN 'user' || i || '@example.com' ELSE '' END,
	CASE WHEN i % 2 = 0 THEN 'USER' || i || '@EXAMPLE.COM' ELSE '' END,
	CASE WHEN i % 3 = 0 THEN 'ext-' || i ELSE '' END,
	i % 1000 <> 0,
	CASE WHEN i % 5000 = 0 THEN '{"team":"t' || (i % 1000) || '","vip":"yes"}'
	     WHEN i % 4 = 0 THEN '{"team":"t' || (i % 1000) || '"}' ELSE '{}' END`

const filterPlanInsert = `INSERT INTO users (name, name_key, role, created_at, updated_at, delete_time, purge_time,
	user_name, user_name_key, email, email_key, external_id, active, labels)`

// filterPlanCase is a filter that must be served through an index, and that index: the one the
// page and the count read to find the filter's users, rather than reading every user and testing
// each.
type filterPlanCase struct {
	filter store.Filter
	// index is the name of the index, or "PRIMARY KEY" for id.
	index string
}

func cmpFilter(field store.FilterField, c store.Comparison, v store.FilterValue) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: field, Cmp: c, Value: v}
}

// userNameIndexes names both indexes that lead with user_name_key, either of which serves a filter
// on the user name: the unique one and the sort's users_user_name_key_id.
const userNameIndexes = "users_user_name_"

func filterPlanCases() []filterPlanCase {
	str := func(s string) store.FilterValue { return store.FilterValue{Kind: store.ValueString, String: s} }
	pre := func(s string) store.FilterValue {
		return store.FilterValue{Kind: store.ValueString, String: s, Match: store.MatchPrefix}
	}
	num := func(i int64) store.FilterValue { return store.FilterValue{Kind: store.ValueInt, Int: i} }
	at := func(us int64) store.FilterValue {
		return store.FilterValue{Kind: store.ValueTime, Time: time.UnixMicro(us)}
	}
	label := func(key, value string) store.Filter {
		return store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: key, Cmp: store.CompareEqual, Value: str(value)}
	}
	and := func(args ...store.Filter) store.Filter { return store.Filter{Op: store.FilterAnd, Args: args} }
	// given_name has no index: beside an indexed comparison, it is tested on the rows that one finds.
	unindexed := cmpFilter(store.FieldGivenName, store.CompareNotEqual, str("Zed"))
	createdRecently := cmpFilter(store.FieldCreatedAt, store.CompareGreater, at(planUsers-100))
	// SCIM's incremental sync: meta.lastModified gt "...".
	updatedRecently := cmpFilter(store.FieldUpdatedAt, store.CompareGreater, at(planUsers-100))
	team := label("team", "t8")
	return []filterPlanCase{
		{cmpFilter(store.FieldID, store.CompareEqual, num(500)), "PRIMARY KEY"},
		{cmpFilter(store.FieldID, store.CompareGreater, num(planUsers-100)), "PRIMARY KEY"},
		{cmpFilter(store.FieldID, store.CompareLessOrEqual, num(100)), "PRIMARY KEY"},
		{and(cmpFilter(store.FieldID, store.CompareGreaterOrEqual, num(1000)), cmpFilter(store.FieldID, store.CompareLess, num(1100))), "PRIMARY KEY"},
		{createdRecently, "created_at"},
		{cmpFilter(store.FieldCreatedAt, store.CompareLess, at(100)), "created_at"},
		{cmpFilter(store.FieldCreatedAt, store.CompareEqual, at(777)), "created_at"},
		{updatedRecently, "users_updated_at_id"},
		{cmpFilter(store.FieldUpdatedAt, store.CompareLessOrEqual, at(100)), "users_updated_at_id"},
		{cmpFilter(store.FieldUserName, store.CompareEqual, str("U123")), userNameIndexes},
		{cmpFilter(store.FieldUserName, store.CompareEqual, pre("u1234")), userNameIndexes},
		{cmpFilter(store.FieldUserName, store.CompareGreater, str("u9990")), userNameIndexes},
		{cmpFilter(store.FieldEmail, store.CompareEqual, str("User124@example.com")), "users_email_unique"},
		{cmpFilter(store.FieldEmail, store.CompareEqual, pre("user124")), "users_email_unique"},
		{cmpFilter(store.FieldExternalID, store.CompareEqual, str("ext-300")), "users_external_id_unique"},
		{cmpFilter(store.FieldExternalID, store.CompareEqual, pre("ext-30")), "users_external_id_unique"},
		{cmpFilter(store.FieldRole, store.CompareEqual, str("auditor")), "role"},
		{cmpFilter(store.FieldRole, store.CompareEqual, pre("aud")), "role"},
		{cmpFilter(store.FieldActive, store.CompareEqual, store.FilterValue{Kind: store.ValueBool, Bool: false}), "users_active_id"},
		{team, "user_labels_key_value"},
		// A label's key: user_labels_key on SQLite, user_labels_key_value on PostgreSQL.
		{store.Filter{Op: store.FilterHasLabel, Key: "vip"}, "user_labels_key"},
		// An AND of an indexed comparison and one that no index serves reads the indexed one's range.
		{and(createdRecently, unindexed), "created_at"},
		{and(updatedRecently, unindexed), "users_updated_at_id"},
		// SCIM's emails[type eq "work"].value eq "...": the work email is the one email, when there is one.
		{and(cmpFilter(store.FieldEmail, store.CompareNotEqual, str("")), cmpFilter(store.FieldEmail, store.CompareEqual, str("user124@example.com"))), "users_email_unique"},
		{and(team, unindexed), "user_labels_key_value"},
		{and(cmpFilter(store.FieldUserName, store.CompareEqual, str("u123")), cmpFilter(store.FieldName, store.CompareNotEqual, str("x"))), userNameIndexes},
	}
}

// filterPlanQueries are the statements of each filter case, as ListUsers runs them: the count, and
// the pages of two sorts, first and after a cursor, without and with deleted users.
func filterPlanQueries(c filterPlanCase) []store.UserQuery {
	cursor := &store.UserCursor{ID: planUsers / 2, Name: "user 10000", Role: "viewer", CreatedAt: time.UnixMicro(planUsers / 2)}
	var qs []store.UserQuery
	for _, sort := range [][]store.SortKey{nil, {{Field: store.SortByCreatedAt, Descending: true}}} {
		for _, after := range []*store.UserCursor{nil, cursor} {
			for _, showDeleted := range []bool{false, true} {
				f := c.filter
				qs = append(qs, store.UserQuery{Filter: &f, Sort: sort, After: after, Limit: 20, ShowDeleted: showDeleted})
			}
		}
	}
	return qs
}

func describeFilterQuery(q store.UserQuery) string {
	return fmt.Sprintf("filter %+v %s", *q.Filter, describeQuery(q))
}

func TestSQLiteFilterQueriesSeekAnIndex(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
		`+filterPlanInsert+`
		SELECT 'user ' || i, 'USER ' || i,
			CASE WHEN i % 1000 = 500 THEN 'auditor' WHEN i % 20 = 0 THEN 'admin' WHEN i % 5 = 1 THEN 'editor' WHEN i % 20 IN (2, 3, 4) THEN '' ELSE 'viewer' END,
			i, i, `+planDeleted+`, `+filterPlanColumns+` FROM n`, planUsers); err != nil {
		t.Fatal(err)
	}
	for _, c := range filterPlanCases() {
		for _, q := range filterPlanQueries(c) {
			for i, st := range planStatements(t, s, q) {
				details := sqlitePlan(t, s, st)
				if why := sqliteFilterPlanProblem(c, details, tieRead(q, i)); why != "" {
					t.Errorf("%s\n%s\nplan %q: %s", describeFilterQuery(q), st.query, details, why)
				}
			}
		}
	}
}

// TestSQLiteLabelPagesInIDOrderReadOnlyTheirRows: a page in id order of a label or its value, alone or
// beside other conditions, first or after a cursor, either direction, walks the label's entries in
// the index's order and joins each to its user: it builds no list of every user with the label and
// sorts nothing, so that it reads what it answers however many users have the label.
func TestSQLiteLabelPagesInIDOrderReadOnlyTheirRows(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	s := openStore(t, filepath.Join(t.TempDir(), "users.db"))
	team := store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: "team", Cmp: store.CompareEqual,
		Value: store.FilterValue{Kind: store.ValueString, String: "t8"}}
	active := cmpFilter(store.FieldActive, store.CompareEqual, store.FilterValue{Kind: store.ValueBool, Bool: true})
	hasTeam := store.Filter{Op: store.FilterHasLabel, Key: "team"}
	for _, f := range []store.Filter{team, {Op: store.FilterAnd, Args: []store.Filter{active, team}}, hasTeam, {Op: store.FilterAnd, Args: []store.Filter{active, hasTeam}}} {
		index := "user_labels_key_value (key=? AND value=?"
		if f.Op == store.FilterHasLabel || f.Op == store.FilterAnd && f.Args[1].Op == store.FilterHasLabel {
			index = "user_labels_key (key=?"
		}
		for _, q := range []store.UserQuery{
			{Filter: &f, Limit: 20},
			{Filter: &f, Limit: 20, After: &store.UserCursor{ID: 500}},
			{Filter: &f, Limit: 20, Sort: []store.SortKey{{Field: store.SortByID, Descending: true}}, After: &store.UserCursor{ID: 500}},
			{Filter: &f, Limit: 20, Offset: 40, ShowDeleted: true},
		} {
			for _, st := range planStatements(t, s, q)[1:] { // the first is the count
				details := sqlitePlan(t, s, st)
				if len(details) < 2 || !strings.HasPrefix(details[0], "SEARCH l USING COVERING INDEX "+index) ||
					!strings.HasPrefix(details[1], "SEARCH users USING INTEGER PRIMARY KEY") ||
					slices.ContainsFunc(details, func(d string) bool { return strings.Contains(d, "TEMP B-TREE") || strings.Contains(d, "LIST SUBQUERY") }) {
					t.Errorf("%s\n%s\nplan %q: does not walk the label's entries in id order and join their users", describeFilterQuery(q), st.query, details)
				}
			}
		}
	}
}

// tieRead reports whether the i-th of planStatements(q) is the read of a cursor page that holds
// the users that tie with the cursor on every sort attribute but id (see pageReads): the planner
// may rightly seek the cursor's point in the sort index for it rather than the filter's index.
func tieRead(q store.UserQuery, i int) bool {
	return i == 1 && q.After != nil && len(q.Sort) > 0 && q.Sort[0].Field != store.SortByID
}

// sqliteFilterPlanProblem says what is wrong with SQLite's plan of a statement of c, or "". A tie
// read may seek any index.
func sqliteFilterPlanProblem(c filterPlanCase, details []string, tie bool) string {
	seeks := false
	for _, d := range details {
		if d == "SCAN users" || strings.HasPrefix(d, "SCAN users USING") || strings.HasPrefix(d, "SCAN user_labels") || strings.HasPrefix(d, "SCAN l") {
			return "reads a whole table or index and tests each row"
		}
		if strings.HasPrefix(d, "SEARCH ") && strings.Contains(d, c.index) {
			seeks = true
		}
	}
	if !seeks && !tie {
		return "does not seek " + c.index
	}
	return ""
}

func TestPostgresFilterQueriesSeekAnIndex(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	s, err := Open(context.Background(), storetest.PostgresSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.writer.Exec(filterPlanInsert+`
		SELECT 'user ' || i, 'USER ' || i,
			CASE WHEN i % 1000 = 500 THEN 'auditor' WHEN i % 20 = 0 THEN 'admin' WHEN i % 5 = 1 THEN 'editor' WHEN i % 20 IN (2, 3, 4) THEN '' ELSE 'viewer' END,
			i, i, `+planDeleted+`, `+filterPlanColumns+` FROM generate_series(1, $1::int) AS i`, planUsers); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.Exec(`VACUUM ANALYZE users, user_labels`); err != nil {
		t.Fatal(err)
	}
	for _, c := range filterPlanCases() {
		for _, q := range filterPlanQueries(c) {
			for i, st := range planStatements(t, s, q) {
				plan, _ := postgresPlan(t, s, st)
				if why := postgresFilterPlanProblem(c, plan, tieRead(q, i)); why != "" {
					t.Errorf("%s\n%s\nplan %s: %s", describeFilterQuery(q), st.query, compactPlan(plan), why)
				}
			}
		}
	}
}

// postgresFilterPlanProblem says what is wrong with PostgreSQL's plan of a statement of c, or "".
func postgresFilterPlanProblem(c filterPlanCase, plan pgPlanNode, tie bool) string {
	if scans(plan) {
		return "reads a whole table"
	}
	index := c.index
	if index == "PRIMARY KEY" {
		index = "users_pkey"
	}
	if !usesIndexLike(plan, index) && !tie {
		return "does not read " + index
	}
	return ""
}

// compactPlan is the plan rooted at n on one line: each node's type, relation and index.
func compactPlan(n pgPlanNode) string {
	out := n.NodeType
	if n.Relation != "" {
		out += " " + n.Relation
	}
	if n.Index != "" {
		out += " " + n.Index
	}
	var children []string
	for _, child := range n.Plans {
		children = append(children, compactPlan(child))
	}
	if len(children) > 0 {
		out += " [" + strings.Join(children, ", ") + "]"
	}
	return out
}

func scans(n pgPlanNode) bool {
	if n.NodeType == "Seq Scan" {
		return true
	}
	for _, child := range n.Plans {
		if scans(child) {
			return true
		}
	}
	return false
}

// usesIndexLike reports whether the plan rooted at n reads an index whose name holds part.
func usesIndexLike(n pgPlanNode, part string) bool {
	if n.Index != "" && strings.Contains(n.Index, part) {
		return true
	}
	for _, child := range n.Plans {
		if usesIndexLike(child, part) {
			return true
		}
	}
	return false
}
