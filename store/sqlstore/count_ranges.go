// Exact totals of a filter on a wide range of id or created_at, at the cost of a narrow one: the
// users not deleted are kept counted per bucket of keys, at several bucket widths
// (user_count_buckets, migrations sqlite/0014 and postgres/0021), and a range's total sums the
// buckets it covers, adds the writes not folded into them yet, and counts the users of its two
// edges, each narrower than one bucket of the finest width, from the index.
package sqlstore

import (
	"math"
	"strings"
	"time"

	"usersd/store"
)

// bucketKind is a key that the buckets count by; its value is user_count_buckets.kind.
type bucketKind struct {
	kind int64
	// column is the users' column of the key, and deltaColumn its column in the deltas.
	column, deltaColumn string
	// shifts are the bucket widths, as powers of two, from the finest level (0) up: a user's bucket
	// at level l is its key >> shifts[l]. The migrations' fold trigger (postgres/0021) repeats them.
	shifts []uint
	// min and max bound the column's values: bounds outside them are clamped, and a bound at them
	// is left out of the statement.
	min, max int64
	// arg is a key as the column takes it as an argument (id is an int32 on PostgreSQL).
	arg func(int64) any
}

// Each step between levels is a factor of 64, so that a range's fringe at a level is at most 63
// buckets on either side. id's finest bucket holds 256 ids, so an edge reads at most 255 users;
// created_at's, about eighteen minutes of creations.
var (
	idBuckets = bucketKind{kind: 1, column: "id", deltaColumn: "user_id", shifts: []uint{8, 14, 20},
		min: math.MinInt32, max: math.MaxInt32, arg: func(v int64) any { return int32(v) }}
	createdAtBuckets = bucketKind{kind: 2, column: "created_at", deltaColumn: "created_at", shifts: []uint{30, 36, 42, 48},
		min: math.MinInt64, max: math.MaxInt64, arg: func(v int64) any { return v }}
	bucketKinds = []bucketKind{idBuckets, createdAtBuckets}
)

// keyRange is the keys from lo to hi, both included; empty when lo > hi.
type keyRange struct{ lo, hi int64 }

// bucketSpan is the buckets from first to last, both included, of one level.
type bucketSpan struct {
	level       int
	first, last int64
}

// rangeCover is how a count reads a range: the spans of whole buckets, the keys those buckets
// hold (for the deltas not folded yet), and the edges, whose users are counted one by one.
type rangeCover struct {
	spans   []bucketSpan
	covered keyRange
	edges   []keyRange
}

// wholeBuckets returns the buckets of width 2^shift that lie wholly within r, as a span from
// first to last; first > last when there are none. It never overflows, at the ends of int64 too.
func wholeBuckets(r keyRange, shift uint) (first, last int64) {
	mask := int64(1)<<shift - 1
	first, last = r.lo>>shift, r.hi>>shift
	if first<<shift != r.lo {
		first++
	}
	if last<<shift+mask != r.hi {
		last--
	}
	return first, last
}

// cover splits r into the spans of buckets of k that r holds whole, the coarsest that fit, and the
// edges that no finest bucket holds whole. A range narrower than two finest buckets is all edge.
func (k bucketKind) cover(r keyRange) rangeCover {
	first, last := wholeBuckets(r, k.shifts[0])
	if first > last {
		return rangeCover{edges: []keyRange{r}}
	}
	var c rangeCover
	c.covered = keyRange{first << k.shifts[0], last<<k.shifts[0] + (int64(1)<<k.shifts[0] - 1)}
	if r.lo < c.covered.lo {
		c.edges = append(c.edges, keyRange{r.lo, c.covered.lo - 1})
	}
	if c.covered.hi < r.hi {
		c.edges = append(c.edges, keyRange{c.covered.hi + 1, r.hi})
	}
	for level := 0; ; level++ {
		if level == len(k.shifts)-1 {
			return appendSpan(c, bucketSpan{level, first, last})
		}
		step := k.shifts[level+1] - k.shifts[level]
		up, upLast := wholeBuckets(keyRange{first, last}, step)
		if up > upLast {
			return appendSpan(c, bucketSpan{level, first, last})
		}
		c = appendSpan(c, bucketSpan{level, first, up<<step - 1})
		c = appendSpan(c, bucketSpan{level, (upLast + 1) << step, last})
		first, last = up, upLast
	}
}

func appendSpan(c rangeCover, s bucketSpan) rangeCover {
	if s.first <= s.last {
		c.spans = append(c.spans, s)
	}
	return c
}

// rangeFilter is a filter that the buckets serve: one range of one key.
type rangeFilter struct {
	kind bucketKind
	keys keyRange
}

// bucketRange returns the range of keys that f selects, if f is a comparison of id or created_at
// by <, <=, > or >=, or an AND of two such comparisons of the same field.
func bucketRange(f *store.Filter) (rangeFilter, bool) {
	if f.Op == store.FilterAnd && len(f.Args) == 2 {
		a, okA := bucketRange(&f.Args[0])
		b, okB := bucketRange(&f.Args[1])
		if !okA || !okB || a.kind.kind != b.kind.kind {
			return rangeFilter{}, false
		}
		return rangeFilter{a.kind, keyRange{max(a.keys.lo, b.keys.lo), min(a.keys.hi, b.keys.hi)}}, true
	}
	if f.Op != store.FilterCompare {
		return rangeFilter{}, false
	}
	switch {
	case f.Field == store.FieldID && f.Value.Kind == store.ValueInt:
		r, ok := comparedRange(idBuckets, f.Cmp, f.Value.Int, false)
		return rangeFilter{idBuckets, r}, ok
	case f.Field == store.FieldCreatedAt && f.Value.Kind == store.ValueTime:
		micros, between := timeKey(f.Value.Time)
		r, ok := comparedRange(createdAtBuckets, f.Cmp, micros, between)
		return rangeFilter{createdAtBuckets, r}, ok
	}
	return rangeFilter{}, false
}

// timeKey is t in Unix microseconds, rounded down, and whether t falls between two of them (as
// compareMicros reads a time).
func timeKey(t time.Time) (int64, bool) {
	return t.UnixMicro(), t.Nanosecond()%int(time.Microsecond) != 0
}

// comparedRange is the range of k's keys that compare with v by cmp; with between, v stands for a
// point just above it. A range that no key reaches is empty.
func comparedRange(k bucketKind, cmp store.Comparison, v int64, between bool) (keyRange, bool) {
	empty := keyRange{1, 0}
	r := keyRange{k.min, k.max}
	switch cmp {
	case store.CompareGreater, store.CompareGreaterOrEqual:
		if cmp == store.CompareGreater || between {
			if v >= k.max {
				return empty, true
			}
			v++
		}
		r.lo = max(v, k.min)
	case store.CompareLess, store.CompareLessOrEqual:
		if cmp == store.CompareLess && !between {
			if v <= k.min {
				return empty, true
			}
			v--
		}
		r.hi = min(v, k.max)
	default:
		return keyRange{}, false
	}
	if r.lo > r.hi {
		return empty, true
	}
	return r, true
}

// keptCountsWhole is the condition that the buckets and the scopes of count_scopes.go have been
// built (see buildCountBuckets).
const keptCountsWhole = `EXISTS (SELECT 1 FROM user_count_buckets WHERE kind = 0 AND level = 0 AND bucket = 0)`

// rangeCount counts the users not deleted whose key is in rf, in one statement, so that every part
// reads the same snapshot: the whole buckets, plus the deltas not folded into them yet, plus the
// users at the edges. Until the buckets are built it answers NULL, and the list counts the users
// of the range instead (keptCount).
func (d *dialect) rangeCount(rf rangeFilter) statement {
	k, r := rf.kind, rf.keys
	if r.lo > r.hi {
		return statement{query: `SELECT 0`}
	}
	var a args
	c := k.cover(r)
	var parts []string
	var kind string
	if len(c.spans) > 0 {
		kind = a.add(k.kind)
	}
	for _, s := range c.spans {
		parts = append(parts, `COALESCE((SELECT SUM(n) FROM user_count_buckets WHERE kind = `+kind+
			` AND level = `+a.add(int64(s.level))+` AND bucket >= `+a.add(s.first)+` AND bucket <= `+a.add(s.last)+`), 0)`)
	}
	if len(c.spans) > 0 {
		parts = append(parts, `COALESCE((SELECT SUM(delta) FROM `+d.bucketDeltas+` AND `+
			d.keyBetween(k.deltaColumn, k, false, c.covered, &a)+`), 0)`)
	}
	for _, e := range c.edges {
		parts = append(parts, `(SELECT COUNT(*) FROM users WHERE delete_time IS NULL AND `+d.keyBetween(k.column, k, true, e, &a)+`)`)
	}
	return statement{`SELECT CASE WHEN ` + keptCountsWhole + ` THEN ` + strings.Join(parts, " + ") + ` END`, a}
}

// keyBetween is the condition that column, of k's keys, lies in r, leaving out a bound at the
// keys' limit; selective marks each bound for the planner as filter.go does.
func (d *dialect) keyBetween(column string, k bucketKind, selective bool, r keyRange, a *args) string {
	var conditions []string
	mark := func(c string) string {
		if selective {
			return d.selective(c)
		}
		return c
	}
	if r.lo > k.min {
		conditions = append(conditions, mark(column+" >= "+a.add(k.arg(r.lo))))
	}
	if r.hi < k.max {
		conditions = append(conditions, mark(column+" <= "+a.add(k.arg(r.hi))))
	}
	if len(conditions) == 0 {
		return column + " IS NOT NULL"
	}
	return strings.Join(conditions, " AND ")
}
