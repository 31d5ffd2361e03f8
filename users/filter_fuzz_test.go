package users

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"usersd/store"
)

// FuzzFilter: parseFilter never panics, refuses only with an InvalidField naming the filter, and
// every filter it accepts is a tree a store can take as it is (see wellFormed).
func FuzzFilter(f *testing.F) {
	for _, seed := range []string{
		``, `id = 1`, `id != -7`, `id >= 0x7fffffff`, `id = 2147483648`,
		`name = "Ada"`, `name = "Ad*"`, `name != "Ad*"`, `role < "b"`, `user_name = "ADA*"`, `userName = "x"`,
		`email = "a@b.c"`, `external_id = "x\"y\\z"`, `externalId = 'q'`,
		`active = true`, `active != false`, `active < true`,
		`created_at > "2026-01-01T00:00:00Z"`, `updatedAt <= "2026-01-01T00:00:00.5+01:00"`, `created_at = "2026-13-01"`,
		`labels:team`, `labels.team:*`, `labels.team = "core"`, `labels."cost-center" != "1"`, `labels.a.b = "c*"`, `labels:*`,
		`id = 1 AND id = 2 OR id = 3`, `(id = 1 OR id = 2) AND NOT id = 3`, `-id = 1`, `NOT (NOT labels:a)`,
		`id = 1 id = 2`, `(id = 1`, `id = 1)`, `name = "a\x00"`, `name = "\u2028"`, `AND((id=1),(id=2))`, `NOT()`, `FUZZY()`, `FUZZY(id = 1)`, `OR()`,
		`foo(1)`, `name = foo("x")`, `a.b.c(1, 2) = 3`, `id = 1.5`, `-5`, `-(5)`, `id = --1`, "\xff", `"\`,
		strings.Repeat("NOT (", 9) + "id = 1" + strings.Repeat(")", 9),
		strings.Repeat("id = 1 OR ", 32) + "id = 1",
		strings.Repeat("(", 300) + "id = 1" + strings.Repeat(")", 300),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, err := parseFilter(text)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Field() != "filter" || !strings.HasPrefix(e.Error(), "filter") {
				t.Fatalf("parseFilter(%q): %v (%T), want an InvalidField of filter", text, err, err)
			}
			return
		}
		if got == nil {
			if strings.TrimSpace(text) != "" {
				t.Fatalf("parseFilter(%q) = nil, nil", text)
			}
			return
		}
		if err := wellFormed(*got); err != nil {
			t.Fatalf("parseFilter(%q) = %+v: %v", text, *got, err)
		}
	})
}

// wellFormed checks what store.Filter promises a store: each comparison's value has its field's
// kind, a prefix comes only with = on a string field other than a label, AND and OR have two
// arguments or more (and no argument of their own kind: chains are flat), NOT has one, the tree
// is at most maxFilterNesting+1 deep and holds at most maxFilterComparisons comparisons, and every
// string is one a stored value could be.
func wellFormed(f store.Filter) error {
	comparisons := 0
	var check func(f store.Filter, depth int) error
	check = func(f store.Filter, depth int) error {
		if depth > maxFilterNesting+1 {
			return fmt.Errorf("deeper than %d", maxFilterNesting+1)
		}
		switch f.Op {
		case store.FilterAnd, store.FilterOr:
			if len(f.Args) < 2 {
				return fmt.Errorf("op %d with %d arguments", f.Op, len(f.Args))
			}
			for _, a := range f.Args {
				if a.Op == f.Op {
					return fmt.Errorf("op %d nested in itself", f.Op)
				}
				if err := check(a, depth+1); err != nil {
					return err
				}
			}
			return nil
		case store.FilterNot:
			if len(f.Args) != 1 {
				return fmt.Errorf("NOT with %d arguments", len(f.Args))
			}
			return check(f.Args[0], depth+1)
		case store.FilterHasLabel:
			comparisons++
			if len(f.Args) != 0 || !labelKey.MatchString(f.Key) {
				return fmt.Errorf("has label %q with %d arguments", f.Key, len(f.Args))
			}
			return nil
		case store.FilterCompare:
			comparisons++
			return wellFormedCompare(f)
		}
		return fmt.Errorf("unknown op %d", f.Op)
	}
	if err := check(f, 1); err != nil {
		return err
	}
	if comparisons > maxFilterComparisons {
		return fmt.Errorf("%d comparisons", comparisons)
	}
	return nil
}

func wellFormedCompare(f store.Filter) error {
	if len(f.Args) != 0 || f.Cmp < store.CompareEqual || f.Cmp > store.CompareGreaterOrEqual {
		return fmt.Errorf("a comparison with %d arguments and operator %d", len(f.Args), f.Cmp)
	}
	v := f.Value
	want := map[store.FilterField]store.ValueKind{
		store.FieldID: store.ValueInt, store.FieldName: store.ValueString, store.FieldRole: store.ValueString,
		store.FieldUserName: store.ValueString, store.FieldEmail: store.ValueString, store.FieldExternalID: store.ValueString,
		store.FieldActive: store.ValueBool, store.FieldCreatedAt: store.ValueTime, store.FieldUpdatedAt: store.ValueTime,
		store.FieldLabel: store.ValueString,
	}[f.Field]
	if want == 0 || v.Kind != want {
		return fmt.Errorf("field %d compared with a value of kind %d", f.Field, v.Kind)
	}
	if (f.Field == store.FieldLabel) != (f.Key != "") || f.Key != "" && !labelKey.MatchString(f.Key) {
		return fmt.Errorf("field %d with key %q", f.Field, f.Key)
	}
	if (f.Field == store.FieldLabel || f.Field == store.FieldActive) && f.Cmp != store.CompareEqual && f.Cmp != store.CompareNotEqual {
		return fmt.Errorf("field %d with operator %d", f.Field, f.Cmp)
	}
	if v.Match != store.MatchWhole && (v.Kind != store.ValueString || f.Field == store.FieldLabel || f.Cmp != store.CompareEqual) {
		return fmt.Errorf("a prefix on field %d with operator %d", f.Field, f.Cmp)
	}
	if v.Kind == store.ValueInt && (v.Int < math.MinInt32 || v.Int > math.MaxInt32) {
		return fmt.Errorf("id %d out of int32", v.Int)
	}
	if v.Kind == store.ValueString && (!utf8.ValidString(v.String) || strings.ContainsFunc(v.String, unicode.IsControl)) {
		return fmt.Errorf("the string %q", v.String)
	}
	if v.Kind == store.ValueTime && v.Time.Location() != nil && v.Time.Location().String() != "UTC" {
		return fmt.Errorf("a time not in UTC: %v", v.Time)
	}
	return nil
}
