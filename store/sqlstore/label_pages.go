// Pages of the users with a label, or a label's value, in id order, on SQLite: SQLite answers "id
// IN (subquery)" by building the subquery's whole list before the first row, which for a common
// label is hundreds of thousands of ids read and sorted for a page of twenty. Read from the side
// table instead, the page is one walk of user_labels_key or user_labels_key_value (migrations
// sqlite/0013 and 0016), whose entries for one key, or one key and value, are in user_id order,
// each joined to its user: the page reads what it answers.
package sqlstore

import (
	"slices"

	"usersd/store"
)

// pageSource is where a page reads its users from: users alone, or a label's entries joined to
// their users.
type pageSource struct {
	from  string
	q     store.UserQuery // q with its filter less the label that drives the page
	terms []orderTerm
	// label, when set, is the label, or the label's value by =, whose entries drive the page.
	label *store.Filter
}

// labelPageFrom joins the label's entries, the outer loop (CROSS JOIN fixes SQLite's join order),
// to their users.
const labelPageFrom = ` FROM user_labels AS l CROSS JOIN users ON users.id = l.user_id`

// pageSourceOf returns where q's pages read from, given its sort order: the label's entries when
// the dialect drives pages by one and q is sorted by id alone, has no name search (which drives
// its own pages through the name keys), and filters on a label or a label's value by =, alone or
// in an AND.
func (d *dialect) pageSourceOf(q store.UserQuery, terms []orderTerm) pageSource {
	plain := pageSource{from: d.from(q), q: q, terms: terms}
	if !d.labelDrivesPages || q.NamePrefix != "" || q.Filter == nil || terms[0].column != "id" {
		return plain
	}
	label, rest := splitLabel(q.Filter)
	if label == nil {
		return plain
	}
	q.Filter = rest
	return pageSource{from: labelPageFrom, q: q, terms: []orderTerm{{column: "l.user_id", descending: terms[0].descending}}, label: label}
}

// conditions returns the WHERE conditions of the source's pages and their arguments: those of
// userFilter, and the label's key and value.
func (d *dialect) conditions(src pageSource) ([]string, args, error) {
	conditions, a, err := d.userFilter(src.q)
	if err != nil || src.label == nil {
		return conditions, a, err
	}
	label := "l.key = " + a.add(src.label.Key)
	if src.label.Op == store.FilterCompare {
		label += " AND l.value = " + a.add(src.label.Value.String)
	}
	return append(conditions, label), a, nil
}

// splitLabel returns the label, or the comparison of a label's value by =, that f is, or the
// first that an AND f holds, and the rest of f without it (nil when nothing is left).
func splitLabel(f *store.Filter) (label, rest *store.Filter) {
	if isLabel(f) {
		return f, nil
	}
	if f.Op != store.FilterAnd {
		return nil, f
	}
	for i := range f.Args {
		if !isLabel(&f.Args[i]) {
			continue
		}
		others := slices.Delete(slices.Clone(f.Args), i, i+1)
		if len(others) == 1 {
			return &f.Args[i], &others[0]
		}
		return &f.Args[i], &store.Filter{Op: store.FilterAnd, Args: others}
	}
	return nil, f
}

// isLabel reports whether f is a label (labels:KEY), or compares a label's value by = with a
// whole string, as compareCondition takes it.
func isLabel(f *store.Filter) bool {
	return f.Op == store.FilterHasLabel || f.Op == store.FilterCompare && f.Field == store.FieldLabel &&
		f.Cmp == store.CompareEqual && f.Value.Kind == store.ValueString && f.Value.Match == store.MatchWhole
}
