package sqlstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// rangePlanSpacing is the time between two users' creations in the range plan tests, in
// microseconds: a finest bucket of created_at then holds as many users as one of id.
const rangePlanSpacing = 1 << 22

// rangePlanFilters are the shapes that the buckets serve, each wide: most users match.
func rangePlanFilters() []store.Filter {
	at := func(i int64) time.Time { return time.UnixMicro(i * rangePlanSpacing) }
	and := func(a, b store.Filter) store.Filter {
		return store.Filter{Op: store.FilterAnd, Args: []store.Filter{a, b}}
	}
	return []store.Filter{
		idCompare(store.CompareGreater, 100),
		idCompare(store.CompareGreaterOrEqual, 100),
		idCompare(store.CompareLess, planUsers-100),
		idCompare(store.CompareLessOrEqual, planUsers-100),
		and(idCompare(store.CompareGreater, 100), idCompare(store.CompareLess, planUsers-100)),
		createdCompare(store.CompareGreater, at(100)),
		createdCompare(store.CompareGreaterOrEqual, at(100).Add(time.Nanosecond)),
		createdCompare(store.CompareLess, at(planUsers-100)),
		createdCompare(store.CompareLessOrEqual, at(planUsers-100)),
		and(createdCompare(store.CompareGreater, at(100)), createdCompare(store.CompareLess, at(planUsers-100))),
	}
}

// rangePlanFill is the INSERT of the range plan tests' users: created rangePlanSpacing apart,
// planDeleted of them deleted.
const rangePlanFill = `INSERT INTO users (name, name_key, role, created_at, updated_at, delete_time, purge_time)
	SELECT 'user ' || i, 'USER ' || i, 'viewer', CAST(i AS BIGINT) * 4194304, CAST(i AS BIGINT) * 4194304, ` + planDeleted

// TestSQLiteRangeCountsReadBucketsAndEdges: SQLite counts a wide range from the buckets' primary
// key and seeks the users of its edges; it never walks the users.
func TestSQLiteRangeCountsReadBucketsAndEdges(t *testing.T) {
	s := openStore(t, t.TempDir()+"/users.db")
	if _, err := s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) `+rangePlanFill+` FROM n`, planUsers); err != nil {
		t.Fatal(err)
	}
	fold(t, s)
	for _, f := range rangePlanFilters() {
		st, ok := s.dialect.keptCount(store.UserQuery{Filter: &f, Limit: 20})
		if !ok {
			t.Fatalf("%s: not served by the buckets", describeRange(f))
		}
		details := sqlitePlan(t, s, st)
		buckets := false
		for _, d := range details {
			if strings.HasPrefix(d, "SCAN users") {
				t.Errorf("%s: %q reads every user\n%s", describeRange(f), d, st.query)
			}
			buckets = buckets || strings.HasPrefix(d, "SEARCH user_count_buckets USING PRIMARY KEY (kind=? AND level=? AND bucket>? AND bucket<?)")
		}
		if !buckets {
			t.Errorf("%s: does not seek the buckets: %q", describeRange(f), details)
		}
	}
	wantExactTotals(t, s, "on the plans' users", rangePlanFilters())
}

// pgAnalyzedNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type pgAnalyzedNode struct {
	NodeType string           `json:"Node Type"`
	Relation string           `json:"Relation Name"`
	Rows     float64          `json:"Actual Rows"`
	Loops    float64          `json:"Actual Loops"`
	Plans    []pgAnalyzedNode `json:"Plans"`
}

// postgresAnalyzedPlan runs st under EXPLAIN (ANALYZE, FORMAT JSON) and returns the root of the
// plan as it ran, and the JSON itself (postgresPlan's twin for plans that ran).
func postgresAnalyzedPlan(t *testing.T, s *Store, st statement) (pgAnalyzedNode, []byte) {
	t.Helper()
	var raw []byte
	if err := s.reader.QueryRow(`EXPLAIN (ANALYZE, FORMAT JSON) `+st.query, st.args...).Scan(&raw); err != nil {
		t.Fatalf("explain analyze %s: %v", st.query, err)
	}
	var plan []struct{ Plan pgAnalyzedNode }
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("EXPLAIN answered %s: %v", raw, err)
	}
	return plan[0].Plan, raw
}

// usersRead is how many rows of users the nodes under n read, and whether any read the whole table,
// counting only the nodes that ran.
func usersRead(n pgAnalyzedNode) (rows float64, seq bool) {
	if n.Relation == "users" && n.Loops > 0 {
		rows, seq = n.Rows*n.Loops, n.NodeType == "Seq Scan"
	}
	for _, c := range n.Plans {
		r, s := usersRead(c)
		rows, seq = rows+r, seq || s
	}
	return rows, seq
}

// TestPostgresRangeCountsReadBucketsAndEdges: run, the count of a wide range reads at most the
// users of its two edges (fewer than two finest buckets), never the range's own users.
func TestPostgresRangeCountsReadBucketsAndEdges(t *testing.T) {
	s := openStore(t, storetest.PostgresSchema(t))
	if _, err := s.writer.Exec(rangePlanFill+` FROM generate_series(1, $1::int) AS i`, planUsers); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.Exec(`VACUUM ANALYZE users, user_count_deltas`); err != nil {
		t.Fatal(err)
	}
	for i, f := range rangePlanFilters() {
		st, ok := s.dialect.keptCount(store.UserQuery{Filter: &f, Limit: 20})
		if !ok {
			t.Fatalf("%s: not served by the buckets", describeRange(f))
		}
		if i == 1 {
			fold(t, s) // the first with the load's deltas pending, the rest after they are folded
		}
		plan, raw := postgresAnalyzedPlan(t, s, st)
		if rows, seq := usersRead(plan); seq || rows > 2*256 {
			t.Errorf("%s: read %v users (whole table: %v)\n%s\n%s", describeRange(f), rows, seq, st.query, raw)
		}
	}
	wantExactTotals(t, s, "on the plans' users", rangePlanFilters())
}

// TestPostgresScopeCountsReadNoUsers: run, the count of a filter on active or on a label reads the
// kept counts alone, neither the users nor their labels, however many match.
func TestPostgresScopeCountsReadNoUsers(t *testing.T) {
	s := openStore(t, storetest.PostgresSchema(t))
	if _, err := s.writer.Exec(filterPlanInsert+`
		SELECT 'user ' || i, 'USER ' || i, 'viewer', i, i, `+planDeleted+`, `+filterPlanColumns+` FROM generate_series(1, $1::int) AS i`, planUsers); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.Exec(`VACUUM ANALYZE users, user_labels, user_count_deltas`); err != nil {
		t.Fatal(err)
	}
	for _, f := range scopeFilters() {
		st, ok := s.dialect.keptCount(store.UserQuery{Filter: &f, Limit: 20})
		if !ok {
			t.Fatalf("%+v: not served by kept counts", f)
		}
		plan, raw := postgresAnalyzedPlan(t, s, st)
		if !neverRan(plan, "users") || !neverRan(plan, "user_labels") {
			t.Errorf("%+v: reads the users\n%s", f, raw)
		}
	}
	wantExactTotals(t, s, "on the plans' users", scopeFilters())
}

// neverRan reports whether no node under n that reads relation ran.
func neverRan(n pgAnalyzedNode, relation string) bool {
	if n.Relation == relation && n.Loops > 0 {
		return false
	}
	for _, c := range n.Plans {
		if !neverRan(c, relation) {
			return false
		}
	}
	return true
}
