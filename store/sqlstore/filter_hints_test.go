package sqlstore

import (
	"strings"
	"testing"

	"usersd/store"
)

// TestRangeHintsOnlyWhereAllRowsMustMeetThem: SQLite's planner is told that a filter's range holds
// for few rows only where every row of the answer must be in it (the filter itself, or an AND of
// it). Under an OR, the hint made SQLite read each branch's range and merge them, a multiple of
// one scan for wide ranges; under a NOT the rows are those outside the range.
func TestRangeHintsOnlyWhereAllRowsMustMeetThem(t *testing.T) {
	byID := func(n int64) store.Filter {
		return store.Filter{Op: store.FilterCompare, Field: store.FieldID, Cmp: store.CompareGreater, Value: store.FilterValue{Kind: store.ValueInt, Int: n}}
	}
	for _, c := range []struct {
		name  string
		f     store.Filter
		hints int
	}{
		{"a range", byID(1), 1},
		{"an AND of ranges", store.Filter{Op: store.FilterAnd, Args: []store.Filter{byID(1), byID(2)}}, 2},
		{"an OR of ranges", store.Filter{Op: store.FilterOr, Args: []store.Filter{byID(1), byID(2), byID(3)}}, 0},
		{"a NOT of a range", store.Filter{Op: store.FilterNot, Args: []store.Filter{byID(1)}}, 0},
		{"an AND holding an OR", store.Filter{Op: store.FilterAnd, Args: []store.Filter{byID(1),
			{Op: store.FilterOr, Args: []store.Filter{byID(2), byID(3)}}}}, 1},
	} {
		var a args
		sql, err := sqliteDialect.filterCondition(&c.f, &a)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := strings.Count(sql, "likelihood("); n != c.hints {
			t.Errorf("%s: %d hints in %s, want %d", c.name, n, sql, c.hints)
		}
	}
}
