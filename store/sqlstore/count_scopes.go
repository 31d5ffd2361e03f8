// Exact totals of the filters on active, on a label's value, on a label's key and on the role, read
// from kept counts (migrations sqlite/0015 and postgres/0022; the role's since sqlite/0003 and
// postgres/0007) instead of counting every match: a filter that keeps most users (active = true),
// a popular label or a common role would otherwise read millions of index entries per page.
package sqlstore

import (
	"usersd/store"
)

// inactiveScope is the kept count of the users not deleted whose active is false.
const inactiveScope = "inactive"

// labelScope is the kept count of the users not deleted that have the label key=value; a key
// never holds "=", so no two labels share a scope.
func labelScope(key, value string) string { return "label:" + key + "=" + value }

// labelKeyScope is the kept count of the users not deleted that have a label of key.
func labelKeyScope(key string) string { return "labelkey:" + key }

// scopeFilter is a filter that kept scopes answer: the count of plus less the count of minus
// ("" for none).
type scopeFilter struct {
	plus, minus string
}

// keptScopes returns the scopes that answer f, if f is a comparison of active, of a label's value
// by =, of the role by = or !=, or whether a label's key is there.
func keptScopes(f *store.Filter) (scopeFilter, bool) {
	if f.Op == store.FilterHasLabel {
		return scopeFilter{plus: labelKeyScope(f.Key)}, true
	}
	if f.Op != store.FilterCompare {
		return scopeFilter{}, false
	}
	switch {
	case f.Field == store.FieldActive && f.Value.Kind == store.ValueBool &&
		(f.Cmp == store.CompareEqual || f.Cmp == store.CompareNotEqual):
		if f.Value.Bool == (f.Cmp == store.CompareEqual) { // the active users
			return scopeFilter{plus: countScope(""), minus: inactiveScope}, true
		}
		return scopeFilter{plus: inactiveScope}, true
	case f.Field == store.FieldLabel && f.Cmp == store.CompareEqual && f.Value.Kind == store.ValueString && f.Value.Match == store.MatchWhole:
		return scopeFilter{plus: labelScope(f.Key, f.Value.String)}, true
	case f.Field == store.FieldRole && f.Value.Kind == store.ValueString && f.Value.Match == store.MatchWhole &&
		(f.Cmp == store.CompareEqual || f.Cmp == store.CompareNotEqual):
		// The role's own count, which the lists by role read too ("role:" is the users without one).
		role := "role:" + f.Value.String
		if f.Cmp == store.CompareEqual {
			return scopeFilter{plus: role}, true
		}
		return scopeFilter{plus: countScope(""), minus: role}, true
	}
	return scopeFilter{}, false
}

// scopeCount counts the users not deleted that the kept scopes sf answer, in one statement; until
// the kept counts are whole (see buildCountBuckets), it answers NULL, and the list counts the users
// instead (keptCount).
func (d *dialect) scopeCount(sf scopeFilter) statement {
	var a args
	kept := d.keptScope(a.add(sf.plus))
	if sf.minus != "" {
		kept += " - " + d.keptScope(a.add(sf.minus))
	}
	return statement{`SELECT CASE WHEN ` + keptCountsWhole + ` THEN ` + kept + ` END`, a}
}
