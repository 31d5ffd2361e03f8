// The filter of a list of users (store.Filter) in SQL: one condition of the list's WHERE, built
// from fixed column names and operators, with every value of the filter bound as a parameter, so
// that no text of the client's ever reaches the SQL. The page and its total share the condition.
//
// The fields that a filter is fast on read an index on both backends: id (the primary key),
// created_at (the sort indexes), updated_at (users_updated_at_id), role (the role indexes),
// user_name, email and external_id (their unique indexes, on the stored keys), active
// (users_active_id) and the labels (the side table user_labels, which triggers keep from
// users.labels). name is served by its sort index too.
// given_name and family_name have no index, and a suffix or a part inside a string
// (SCIM's ew and co) none can serve: a filter on them alone reads the users in the sort order and
// tests each.
//
// Totals count with the same condition, but for the filters that kept counts answer in a list
// without deleted users, role or name search (list.go, keptCount): one range of id or created_at
// (count_ranges.go), active or the role by = or !=, a label's value by = and a label's key
// (count_scopes.go).
// Otherwise an equality or a short range counts its index range, and a wide range under an AND,
// an OR, a != of a string or a NOT counts every match.
package sqlstore

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"usersd/store"
)

// filterCondition returns the condition of f, each value added to a.
func (d *dialect) filterCondition(f *store.Filter, a *args) (string, error) {
	switch f.Op {
	case store.FilterAnd, store.FilterOr:
		if len(f.Args) < 2 {
			return "", fmt.Errorf("filter: %d arguments to AND or OR, want two or more", len(f.Args))
		}
		parts := make([]string, len(f.Args))
		inner := d
		if f.Op == store.FilterOr {
			inner = d.withoutRangeHints()
		}
		for i := range f.Args {
			c, err := inner.filterCondition(&f.Args[i], a)
			if err != nil {
				return "", err
			}
			parts[i] = "(" + c + ")"
		}
		if f.Op == store.FilterAnd {
			return strings.Join(parts, " AND "), nil
		}
		return strings.Join(parts, " OR "), nil
	case store.FilterNot:
		if len(f.Args) != 1 {
			return "", fmt.Errorf("filter: %d arguments to NOT, want one", len(f.Args))
		}
		// Every column a filter reads is NOT NULL and every subquery answers TRUE or FALSE, so NOT
		// is the complement: no NULL makes a row match neither a condition nor its negation.
		c, err := d.withoutRangeHints().filterCondition(&f.Args[0], a)
		if err != nil {
			return "", err
		}
		return "NOT (" + c + ")", nil
	case store.FilterHasLabel:
		return labelUsers("key = " + a.add(f.Key)), nil
	case store.FilterCompare:
		return d.compareCondition(f, a)
	}
	return "", fmt.Errorf("filter: unknown node %d", f.Op)
}

// labelUsers is the condition of the users that have a label that meets condition: the side table
// user_labels (migrations sqlite/0013, postgres/0019) holds one row per label of each user, indexed
// by (key, value, user_id), so that the label's users are one range of that index. A user without
// the label has no row, and so meets neither an = nor a != on it, as the contract says.
func labelUsers(condition string) string {
	return "id IN (SELECT user_id FROM user_labels WHERE " + condition + ")"
}

// comparisonOperators are the SQL operators of the comparisons, fixed text only.
var comparisonOperators = map[store.Comparison]string{
	store.CompareEqual:          " = ",
	store.CompareNotEqual:       " <> ",
	store.CompareLess:           " < ",
	store.CompareLessOrEqual:    " <= ",
	store.CompareGreater:        " > ",
	store.CompareGreaterOrEqual: " >= ",
}

// stringColumns are the columns of the string fields, and whether each is compared by its key
// (store.NameKey: ignoring case). The identity columns hold "" for none, and their unique indexes,
// which the filter reads, are partial: WHERE column <> ”.
var stringColumns = map[store.FilterField]struct {
	column  string
	key     bool
	partial bool
}{
	store.FieldName:       {column: "name"},
	store.FieldRole:       {column: "role"},
	store.FieldUserName:   {column: "user_name_key", key: true, partial: true},
	store.FieldEmail:      {column: "email_key", key: true, partial: true},
	store.FieldExternalID: {column: "external_id", partial: true},
	store.FieldGivenName:  {column: "given_name"},
	store.FieldFamilyName: {column: "family_name"},
}

func (d *dialect) compareCondition(f *store.Filter, a *args) (string, error) {
	op, ok := comparisonOperators[f.Cmp]
	if !ok {
		return "", fmt.Errorf("filter: unknown comparison %d", f.Cmp)
	}
	v := f.Value
	if v.Match != store.MatchWhole && (f.Cmp != store.CompareEqual || v.Kind != store.ValueString || f.Field == store.FieldLabel) {
		return "", fmt.Errorf("filter: a part of a value only compares a string field for equality")
	}
	kind := map[store.FilterField]store.ValueKind{
		store.FieldID: store.ValueInt, store.FieldActive: store.ValueBool,
		store.FieldCreatedAt: store.ValueTime, store.FieldUpdatedAt: store.ValueTime,
	}[f.Field]
	if kind == 0 {
		kind = store.ValueString
	}
	if _, isString := stringColumns[f.Field]; kind == store.ValueString && !isString && f.Field != store.FieldLabel {
		return "", fmt.Errorf("filter: unknown field %d", f.Field)
	}
	if v.Kind != kind {
		return "", fmt.Errorf("filter: field %d compares with a value of kind %d, not %d", f.Field, kind, v.Kind)
	}
	switch f.Field {
	case store.FieldID:
		return d.compareID(f.Cmp, v.Int, a), nil
	case store.FieldCreatedAt:
		return d.compareMicros("created_at", f.Cmp, v.Time, a), nil
	case store.FieldUpdatedAt:
		return d.compareMicros("updated_at", f.Cmp, v.Time, a), nil
	case store.FieldActive:
		if f.Cmp != store.CompareEqual && f.Cmp != store.CompareNotEqual {
			return "", fmt.Errorf("filter: active compares only with = and !=")
		}
		// The value is bound like any other: the index (active, id) serves either value, where
		// a partial index would need the value written into the statement for the planner to see
		// that its predicate holds.
		return "active" + op + a.add(v.Bool), nil
	case store.FieldLabel:
		if f.Cmp != store.CompareEqual && f.Cmp != store.CompareNotEqual {
			return "", fmt.Errorf("filter: a label compares only with = and !=")
		}
		return labelUsers("key = " + a.add(f.Key) + " AND value" + op + a.add(v.String)), nil
	}
	c := stringColumns[f.Field]
	value := v.String
	if c.key {
		value = store.NameKey(value)
	}
	switch v.Match {
	case store.MatchSuffix:
		if value == "" { // every text ends with none; SQLite's substr would take it for the whole
			return truth(true) + nonEmpty(c.partial, c.column), nil
		}
		// The value's length in characters, as both backends count a text's.
		return fmt.Sprintf(d.suffixOf, c.column, a.add(int64(utf8.RuneCountInString(value)))) + " = " + a.add(value) +
			nonEmpty(c.partial, c.column), nil
	case store.MatchInside:
		return fmt.Sprintf(d.contains, c.column, a.add(value)) + nonEmpty(c.partial, c.column), nil
	case store.MatchPrefix:
		var from, to string
		if c.key {
			from, to = store.NameKeyRange(v.String)
		} else {
			from, to = prefixRange(v.String)
		}
		condition := d.selective(c.column + " >= " + a.add(from))
		if to != "" {
			condition += " AND " + d.selective(c.column+" < "+a.add(to))
		}
		return condition + nonEmpty(c.partial && from != "", c.column), nil
	}
	// The comparisons that no empty value meets name the partial index's own condition, which
	// SQLite needs to find word for word before it reads a partial index (PostgreSQL would prove
	// it from the value, but only in a plan made for that value).
	excludesEmpty := f.Cmp == store.CompareGreater ||
		(value != "" && (f.Cmp == store.CompareEqual || f.Cmp == store.CompareGreaterOrEqual))
	return d.rangeOf(f.Cmp, c.column+op+a.add(value)) + nonEmpty(c.partial && excludesEmpty, c.column), nil
}

// nonEmpty is the condition of a partial identity index (see stringColumns), when add is set.
func nonEmpty(add bool, column string) string {
	if !add {
		return ""
	}
	return " AND " + column + " <> ''"
}

// compareID compares the id column, an int32, with an int64: a value that no id can reach makes
// the comparison constant rather than an argument that PostgreSQL refuses as out of the column's
// range.
func (d *dialect) compareID(cmp store.Comparison, v int64, a *args) string {
	if v > math.MaxInt32 || v < math.MinInt32 {
		above := v > math.MaxInt32 // every id is below v
		holds := map[store.Comparison]bool{
			store.CompareEqual: false, store.CompareNotEqual: true,
			store.CompareLess: above, store.CompareLessOrEqual: above,
			store.CompareGreater: !above, store.CompareGreaterOrEqual: !above,
		}[cmp]
		return truth(holds)
	}
	return d.rangeOf(cmp, "id"+comparisonOperators[cmp]+a.add(int32(v)))
}

// compareMicros compares a column of Unix microseconds with t, which may fall between two
// microseconds: then no stored time equals it, and the bounds round to the microseconds that
// keep exactly the stored times on the right side of t.
func (d *dialect) compareMicros(column string, cmp store.Comparison, t time.Time, a *args) string {
	floor := t.UnixMicro() // rounds down, before 1970 too
	if t.Nanosecond()%int(time.Microsecond) != 0 {
		switch cmp {
		case store.CompareEqual:
			return truth(false)
		case store.CompareNotEqual:
			return truth(true)
		case store.CompareLess:
			cmp = store.CompareLessOrEqual // below t: at or below its microsecond
		case store.CompareGreaterOrEqual:
			cmp = store.CompareGreater // at or above t: above its microsecond
		}
	}
	return d.rangeOf(cmp, column+comparisonOperators[cmp]+a.add(floor))
}

// rangeOf is condition, a comparison by cmp on an indexed column, as the dialect marks a range
// that a filter reads (see selective).
func (d *dialect) rangeOf(cmp store.Comparison, condition string) string {
	if cmp == store.CompareEqual || cmp == store.CompareNotEqual {
		return condition
	}
	return d.selective(condition)
}

// selective marks condition, one bound of a range on an indexed column, for the dialect's planner
// as one that holds for few rows (dialect.selectiveRange), so that it reads the range rather than
// walk the sort order and test every row.
func (d *dialect) selective(condition string) string {
	if d.selectiveRange == "" {
		return condition
	}
	return fmt.Sprintf(d.selectiveRange, condition)
}

// withoutRangeHints is d without selectiveRange, for the conditions under an OR or a NOT. The hint
// tells the planner that a range holds for few rows, which makes it read the range instead of walking
// the sort order; under an OR it would read every branch's range and merge them (32 wide ranges
// cost a multiple of one scan), and under a NOT the rows are those outside the range.
func (d *dialect) withoutRangeHints() *dialect {
	if d.selectiveRange == "" {
		return d
	}
	plain := *d
	plain.selectiveRange = ""
	return &plain
}

// truth is a condition that always or never holds, in SQL that both backends take.
func truth(holds bool) string {
	if holds {
		return "1 = 1"
	}
	return "1 = 0"
}

// prefixRange is the range [from, to) of the strings that start with prefix, compared byte-wise
// (COLLATE "C" on PostgreSQL, BINARY on SQLite), as store.NameKeyRange is for keys: the bound is
// the prefix with its last character's successor, valid UTF-8; to is "" when none is needed.
func prefixRange(prefix string) (from, to string) {
	upper := []rune(prefix)
	for len(upper) > 0 {
		next := upper[len(upper)-1] + 1
		if next == 0xD800 { // surrogates are not characters: skip them
			next = 0xE000
		}
		if next <= unicode.MaxRune {
			upper[len(upper)-1] = next
			return prefix, string(upper)
		}
		upper = upper[:len(upper)-1]
	}
	return prefix, ""
}
