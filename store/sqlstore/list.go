// Lists of users at any size: the filters, the sort order, and keyset paging in statements that each
// read a range of one index (migrations NNNN_list_indexes.sql), so that a page costs the same at ten
// million users as at a thousand.
package sqlstore

import (
	"fmt"
	"strings"

	"usersd/store"
)

// orderTerm is one column of a sort order.
type orderTerm struct {
	column     string
	descending bool
}

func (t orderTerm) String() string {
	if t.descending {
		return t.column + " DESC"
	}
	return t.column
}

// sortColumns maps each sortable attribute to its column.
var sortColumns = map[store.SortField]string{
	store.SortByID:        "id",
	store.SortByName:      "name",
	store.SortByRole:      "role",
	store.SortByCreatedAt: "created_at",
	store.SortByUserName:  "user_name_key",
}

// orderTerms returns the sort order of q as columns, from the fixed names above and never from client
// text, ending with id so that ties break by id: ascending, but for a sort by user name, whose ties
// follow its direction (store.SortByUserName). Since id is unique, nothing after it can matter: a
// sort that names id ends there. With the role filter every row has the same role,
// so a sort by role orders nothing and is left out (a condition role = $1 AND role = $2 would also
// keep the planner from seeing that one index serves the page).
func orderTerms(q store.UserQuery) ([]orderTerm, error) {
	var terms []orderTerm
	for _, k := range q.Sort {
		column, ok := sortColumns[k.Field]
		if !ok {
			return nil, fmt.Errorf("cannot sort by %q", k.Field)
		}
		if k.Field == store.SortByRole && q.Role != "" {
			continue
		}
		if k.Field == store.SortByUserName {
			// users_user_name_key_id read forwards or backwards: the tie-break follows the sort.
			if q.Role != "" || q.NamePrefix != "" || len(q.Sort) > 1 {
				return nil, fmt.Errorf("no index sorts by %q within a role, a name search or another sort key", k.Field)
			}
			return append(terms, orderTerm{column: column, descending: k.Descending}, orderTerm{column: "id", descending: k.Descending}), nil
		}
		terms = append(terms, orderTerm{column: column, descending: k.Descending})
		if k.Field == store.SortByID {
			return terms, nil
		}
	}
	return append(terms, orderTerm{column: "id"}), nil
}

func orderBy(terms []orderTerm) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

// cursorValue is the value of column at cursor c, in the form the column stores.
func cursorValue(c *store.UserCursor, column string) any {
	switch column {
	case "name":
		return c.Name
	case "role":
		return c.Role
	case "created_at":
		return micros(c.CreatedAt)
	case "user_name_key":
		return store.NameKey(c.UserName)
	default:
		return c.ID
	}
}

// args numbers the parameters of one statement as they are added.
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return placeholder(len(*a))
}

// from is the FROM clause of a statement that reads the users q selects. With a name search it holds
// the dialect's hint, if any, that makes the statement read the range of name keys: the cost of a
// search is then what it matches, whatever else the query says.
func (d *dialect) from(q store.UserQuery) string {
	if q.NamePrefix != "" {
		return ` FROM users` + d.nameSearchHint
	}
	return ` FROM users`
}

// userFilter returns the WHERE conditions of q's role filter, name search and filter (filter.go),
// and of the users' state (deleted users only with ShowDeleted), and their arguments. The state
// needs no index of its own: the sort indexes give the order and skip the deleted users, few at any
// time (only those within their retention), as they go; the name search's index holds delete_time.
func (d *dialect) userFilter(q store.UserQuery) ([]string, args, error) {
	var conditions []string
	var a args
	if !q.ShowDeleted {
		conditions = append(conditions, "delete_time IS NULL")
	}
	if q.Role != "" {
		conditions = append(conditions, "role = "+a.add(q.Role))
	}
	if q.NamePrefix != "" {
		from, to := store.NameKeyRange(q.NamePrefix)
		conditions = append(conditions, "name_key >= "+a.add(from))
		if to != "" {
			conditions = append(conditions, "name_key < "+a.add(to))
		}
	}
	if q.Filter != nil {
		condition, err := d.filterCondition(q.Filter, &a)
		if err != nil {
			return nil, nil, err
		}
		conditions = append(conditions, "("+condition+")")
	}
	return conditions, a, nil
}

// statement is one SQL statement and its arguments.
type statement struct {
	query string
	args  args
}

// rangeRead is a statement that reads rows in order, to which the reader adds how many it wants.
type rangeRead struct {
	statement
	offset int64
}

// limited returns the statement that reads up to limit rows of r.
func (r rangeRead) limited(limit int) statement {
	a := append(args(nil), r.args...)
	query := r.query + ` LIMIT ` + a.add(limit)
	if r.offset > 0 {
		query += ` OFFSET ` + a.add(r.offset)
	}
	return statement{query, a}
}

// countStatement counts the users that q selects. Without a name search or a filter, the dialect
// reads a kept count; with one, the statement counts the matches with the page's own conditions,
// from the index that serves them (so a search costs what it matches; for a filter, see filter.go),
// unless keptCount answers first.
func (d *dialect) countStatement(q store.UserQuery) (statement, error) {
	if q.NamePrefix == "" && q.Filter == nil {
		query, args := d.countUsers(q.Role, q.ShowDeleted)
		return statement{query, args}, nil
	}
	conditions, a, err := d.userFilter(q)
	if err != nil {
		return statement{}, err
	}
	return statement{`SELECT COUNT(*)` + d.from(q) + where(conditions), a}, nil
}

// keptCount is the statement of q's total from kept counts, if q is a shape they serve: a list
// without deleted users, role or name search, whose filter is one range of id or created_at
// (count_ranges.go), or a comparison of active, the role or a label (count_scopes.go). It answers
// NULL until the kept counts are whole, and the list then runs countStatement in the same snapshot.
// The two are apart on purpose: one statement holding both would be planned at the cost of the
// count it never runs, which makes PostgreSQL compile it (JIT) for tens of milliseconds a request.
func (d *dialect) keptCount(q store.UserQuery) (statement, bool) {
	if q.ShowDeleted || q.Role != "" || q.NamePrefix != "" || q.Filter == nil {
		return statement{}, false
	}
	if rf, ok := bucketRange(q.Filter); ok {
		return d.rangeCount(rf), true
	}
	if sf, ok := keptScopes(q.Filter); ok {
		return d.scopeCount(sf), true
	}
	return statement{}, false
}

// pageReads returns the reads of q's page, to be run in order until enough rows have come back:
// each reads a range of one index in the sort order, and the rows of each come after the rows of
// the ones before it.
//
// With an offset (page numbers) that is one read that skips offset rows. After a cursor it is one
// read per sort term, from the last to the first, for the lexicographic condition "after the
// cursor": for the order (t1, ..., tn), read k holds the rows equal to the cursor on t1..t(k-1) and
// after it on tk. As one OR, the condition would defeat the index whenever the directions differ
// (-role keeps its ties by id ascending); as separate ranges, each is one seek into an index.
func (d *dialect) pageReads(q store.UserQuery) ([]rangeRead, error) {
	terms, err := orderTerms(q)
	if err != nil {
		return nil, err
	}
	src := d.pageSourceOf(q, terms)
	terms = src.terms
	if q.After == nil {
		conditions, a, err := d.conditions(src)
		if err != nil {
			return nil, err
		}
		query := `SELECT ` + userColumns + src.from + where(conditions) + ` ORDER BY ` + orderBy(terms)
		return []rangeRead{{statement{query, a}, q.Offset}}, nil
	}
	reads := make([]rangeRead, 0, len(terms))
	for k := len(terms) - 1; k >= 0; k-- {
		conditions, a, err := d.conditions(src)
		if err != nil {
			return nil, err
		}
		for _, equal := range terms[:k] {
			conditions = append(conditions, equal.column+" = "+a.add(cursorValue(q.After, equal.column)))
		}
		after, comparison := terms[k], " > "
		if after.descending {
			comparison = " < "
		}
		conditions = append(conditions, after.column+comparison+a.add(cursorValue(q.After, after.column)))
		// The terms before k are constant in this range: the order is the rest.
		query := `SELECT ` + userColumns + src.from + where(conditions) + ` ORDER BY ` + orderBy(terms[k:])
		reads = append(reads, rangeRead{statement: statement{query, a}})
	}
	return reads, nil
}

func where(conditions []string) string {
	if len(conditions) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conditions, " AND ")
}
