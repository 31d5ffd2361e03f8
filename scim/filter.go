package scim

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	filter "github.com/scim2/filter-parser/v2"

	"usersd/store"
)

// The limits of a filter, the same as those of a REST filter: they bound the work of a parse and
// the size of the query a store builds from it.
const (
	maxFilterBytes       = 2000
	maxFilterComparisons = 32
	maxFilterNesting     = 8
)

// parseFilter turns a SCIM filter (RFC 7644 section 3.4.2.2) into the store's typed tree, whose
// every value a store binds as a parameter. scim2/filter-parser does the grammar; the attributes,
// operators and values usersd keeps are checked here. Every refusal is invalidFilter.
func parseFilter(text string) (*store.Filter, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	if len(text) > maxFilterBytes {
		return nil, refuse(typeInvalidFilter, "the filter is %d bytes long; at most %d are allowed", len(text), maxFilterBytes)
	}
	expr, err := filter.ParseFilter([]byte(subAttributeInside(text)))
	if err != nil {
		return nil, refuse(typeInvalidFilter, "the filter %q is not a SCIM filter: %v", text, err)
	}
	b := filterBuilder{}
	f, err := b.build(expr, 0)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

type filterBuilder struct{ comparisons int }

func (b *filterBuilder) build(expr filter.Expression, depth int) (store.Filter, error) {
	if depth > maxFilterNesting {
		return store.Filter{}, refuse(typeInvalidFilter, "the filter nests deeper than %d levels", maxFilterNesting)
	}
	switch e := expr.(type) {
	case *filter.LogicalExpression:
		op := store.FilterAnd
		if e.Operator == filter.OR {
			op = store.FilterOr
		}
		var args []store.Filter
		for _, side := range []filter.Expression{e.Left, e.Right} {
			inner := depth + 1
			if l, ok := side.(*filter.LogicalExpression); ok && l.Operator == e.Operator {
				inner = depth // a chain of one operator is one level
			}
			f, err := b.build(side, inner)
			if err != nil {
				return store.Filter{}, err
			}
			parts := []store.Filter{f}
			if f.Op == op {
				parts = f.Args
			}
			for _, part := range parts {
				// The same term twice (a value path's "has a value", once per value path) is once.
				if !slices.ContainsFunc(args, func(a store.Filter) bool { return reflect.DeepEqual(a, part) }) {
					args = append(args, part)
				}
			}
		}
		if len(args) == 1 {
			return args[0], nil
		}
		return store.Filter{Op: op, Args: args}, nil
	case *filter.NotExpression:
		f, err := b.build(e.Expression, depth+1)
		if err != nil {
			return store.Filter{}, err
		}
		return store.Filter{Op: store.FilterNot, Args: []store.Filter{f}}, nil
	case *filter.AttributeExpression:
		return b.compare(e.AttributePath, e.Operator, e.CompareValue, "")
	case *filter.ValuePath:
		return b.valuePath(e, depth)
	}
	return store.Filter{}, refuse(typeInvalidFilter, "the filter holds an expression usersd does not know: %v", expr)
}

// valuePath is a filter on the values of a multi-valued attribute: emails[type eq "work"] or
// roles[value eq "admin"]. usersd keeps one value of each, the primary one, whose type is work.
func (b *filterBuilder) valuePath(e *filter.ValuePath, depth int) (store.Filter, error) {
	if e.AttributePath.SubAttribute != nil {
		return store.Filter{}, refuse(typeInvalidFilter, "%v: a value filter applies to a multi-valued attribute", e.AttributePath)
	}
	parent := strings.ToLower(e.AttributePath.AttributeName)
	if parent != "emails" && parent != "roles" {
		return store.Filter{}, refuse(typeInvalidFilter, "%v: usersd filters the values of emails and roles only", e.AttributePath)
	}
	// Inside the brackets, attributes are the sub-attributes of parent.
	var inner func(expr filter.Expression, depth int) (store.Filter, error)
	inner = func(expr filter.Expression, depth int) (store.Filter, error) {
		if depth > maxFilterNesting {
			return store.Filter{}, refuse(typeInvalidFilter, "the filter nests deeper than %d levels", maxFilterNesting)
		}
		switch x := expr.(type) {
		case *filter.LogicalExpression:
			l, err := inner(x.Left, depth+1)
			if err != nil {
				return store.Filter{}, err
			}
			r, err := inner(x.Right, depth+1)
			if err != nil {
				return store.Filter{}, err
			}
			op := store.FilterAnd
			if x.Operator == filter.OR {
				op = store.FilterOr
			}
			return store.Filter{Op: op, Args: []store.Filter{l, r}}, nil
		case *filter.NotExpression:
			f, err := inner(x.Expression, depth+1)
			if err != nil {
				return store.Filter{}, err
			}
			return store.Filter{Op: store.FilterNot, Args: []store.Filter{f}}, nil
		case *filter.AttributeExpression:
			if x.AttributePath.SubAttribute != nil || x.AttributePath.URIPrefix != nil {
				return store.Filter{}, refuse(typeInvalidFilter, "%v is not a sub-attribute of %s", x.AttributePath, parent)
			}
			return b.compare(filter.AttributePath{AttributeName: parent, SubAttribute: &x.AttributePath.AttributeName}, x.Operator, x.CompareValue, parent)
		}
		return store.Filter{}, refuse(typeInvalidFilter, "%v: a value filter holds comparisons of sub-attributes", expr)
	}
	f, err := inner(e.ValueFilter, depth+1)
	if err != nil {
		return store.Filter{}, err
	}
	// A value filter selects among the values there are: a user without one has none to select,
	// whatever the filter says of a value's type (emails[not (type eq "work")] is no user without
	// an email).
	field := store.FieldEmail
	if parent == "roles" {
		field = store.FieldRole
	}
	has := present(field)
	args := []store.Filter{has}
	parts := []store.Filter{f}
	if f.Op == store.FilterAnd {
		parts = f.Args
	}
	for _, part := range parts {
		if !isPresent(part, field) {
			args = append(args, part)
		}
	}
	if len(args) == 1 {
		return has, nil
	}
	return store.Filter{Op: store.FilterAnd, Args: args}, nil
}

// attributeKinds are the attributes a filter may name, lower-cased, with what each compares.
var attributeKinds = map[string]struct {
	field store.FilterField
	kind  store.ValueKind
	// always says that every user has the attribute, so that pr holds for all.
	always bool
}{
	"id":                {field: store.FieldID, kind: store.ValueInt, always: true},
	"username":          {field: store.FieldUserName, kind: store.ValueString},
	"externalid":        {field: store.FieldExternalID, kind: store.ValueString},
	"displayname":       {field: store.FieldName, kind: store.ValueString, always: true},
	"name.formatted":    {field: store.FieldName, kind: store.ValueString, always: true},
	"name.givenname":    {field: store.FieldGivenName, kind: store.ValueString},
	"name.familyname":   {field: store.FieldFamilyName, kind: store.ValueString},
	"emails":            {field: store.FieldEmail, kind: store.ValueString},
	"emails.value":      {field: store.FieldEmail, kind: store.ValueString},
	"roles":             {field: store.FieldRole, kind: store.ValueString},
	"roles.value":       {field: store.FieldRole, kind: store.ValueString},
	"active":            {field: store.FieldActive, kind: store.ValueBool, always: true},
	"meta.created":      {field: store.FieldCreatedAt, kind: store.ValueTime, always: true},
	"meta.lastmodified": {field: store.FieldUpdatedAt, kind: store.ValueTime, always: true},
}

// compare is one comparison of an attribute with a value.
func (b *filterBuilder) compare(path filter.AttributePath, op filter.CompareOperator, value any, within string) (store.Filter, error) {
	b.comparisons++
	if b.comparisons > maxFilterComparisons {
		return store.Filter{}, refuse(typeInvalidFilter, "the filter holds more than %d comparisons", maxFilterComparisons)
	}
	if uri := path.URI(); uri != "" && !strings.EqualFold(uri, schemaUser) {
		return store.Filter{}, refuse(typeInvalidFilter, "%v: usersd's users have only the core User schema", path)
	}
	name := strings.ToLower(path.AttributeName)
	if sub := path.SubAttributeName(); sub != "" {
		name += "." + strings.ToLower(sub)
	}
	switch name {
	case "meta.resourcetype":
		return constant(op, value, resourceTypeUserName, path)
	case "emails.type":
		// The one email usersd keeps is the work email.
		return subConstant(op, value, "work", path, store.FieldEmail)
	case "emails.primary", "roles.primary":
		field := store.FieldEmail
		if within == "roles" || strings.HasPrefix(name, "roles") {
			field = store.FieldRole
		}
		return subConstant(op, value, true, path, field)
	}
	attr, ok := attributeKinds[name]
	if !ok {
		return store.Filter{}, refuse(typeInvalidFilter, "%v is not an attribute usersd filters on; use id, userName, externalId, displayName, name.givenName, name.familyName, emails.value, roles.value, active, meta.created or meta.lastModified", path)
	}
	if op == filter.PR {
		if attr.always {
			return truth(true), nil
		}
		return present(attr.field), nil
	}
	if s, ok := value.(string); ok {
		unescaped, err := unescape(s, path)
		if err != nil {
			return store.Filter{}, err
		}
		// No stored value holds a control character, and a database may refuse to compare with
		// one (PostgreSQL with a NUL), as REST's filter says.
		if !utf8.ValidString(unescaped) || strings.ContainsFunc(unescaped, unicode.IsControl) {
			return store.Filter{}, refuse(typeInvalidFilter, "%v: the string %q must be UTF-8 text without control characters", path, unescaped)
		}
		value = unescaped
	}
	cmp, match, err := comparison(op, attr.kind, path)
	if err != nil {
		return store.Filter{}, err
	}
	v, err := typedValue(value, attr.kind, path)
	if err != nil {
		return store.Filter{}, err
	}
	if attr.field == store.FieldID && v.Kind == store.ValueString {
		// An id usersd never issues: no user has it.
		return truth(cmp == store.CompareNotEqual), nil
	}
	v.Match = match
	return store.Filter{Op: store.FilterCompare, Field: attr.field, Cmp: cmp, Value: v}, nil
}

// unescape is a filter's string as it means it: the parser keeps the JSON escapes (\" and \\,
// \u0041) of its text.
func unescape(s string, path filter.AttributePath) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var out string
	if err := json.Unmarshal([]byte(`"`+s+`"`), &out); err != nil {
		return "", refuse(typeInvalidFilter, "%v compares with a string whose escapes are not JSON's: %q", path, s)
	}
	return out, nil
}

// comparison is the store's comparison of a SCIM operator on a value of kind.
func comparison(op filter.CompareOperator, kind store.ValueKind, path filter.AttributePath) (store.Comparison, store.Match, error) {
	switch strings.ToLower(string(op)) {
	case "eq":
		return store.CompareEqual, store.MatchWhole, nil
	case "ne":
		return store.CompareNotEqual, store.MatchWhole, nil
	case "co", "sw", "ew":
		if kind != store.ValueString {
			return 0, 0, refuse(typeInvalidFilter, "%v: %s compares strings only", path, op)
		}
		return store.CompareEqual, map[string]store.Match{"co": store.MatchInside, "sw": store.MatchPrefix, "ew": store.MatchSuffix}[strings.ToLower(string(op))], nil
	case "gt", "ge", "lt", "le":
		if kind == store.ValueBool {
			return 0, 0, refuse(typeInvalidFilter, "%v: %s does not compare booleans", path, op)
		}
		return map[string]store.Comparison{"gt": store.CompareGreater, "ge": store.CompareGreaterOrEqual,
			"lt": store.CompareLess, "le": store.CompareLessOrEqual}[strings.ToLower(string(op))], store.MatchWhole, nil
	}
	return 0, 0, refuse(typeInvalidFilter, "%v: unknown operator %q", path, op)
}

// typedValue is a filter's literal as the kind of value its attribute compares with.
func typedValue(value any, kind store.ValueKind, path filter.AttributePath) (store.FilterValue, error) {
	switch kind {
	case store.ValueString:
		if s, ok := value.(string); ok {
			return store.FilterValue{Kind: store.ValueString, String: s}, nil
		}
	case store.ValueBool:
		if v, ok := value.(bool); ok {
			return store.FilterValue{Kind: store.ValueBool, Bool: v}, nil
		}
	case store.ValueTime:
		if s, ok := value.(string); ok {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return store.FilterValue{}, refuse(typeInvalidFilter, "%v compares with a dateTime such as \"2026-11-27T12:00:00Z\", not %q", path, s)
			}
			return store.FilterValue{Kind: store.ValueTime, Time: t}, nil
		}
	case store.ValueInt:
		// SCIM ids are strings; usersd's are the decimal digits of an integer.
		if s, ok := value.(string); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
				return store.FilterValue{Kind: store.ValueInt, Int: n}, nil
			}
			return store.FilterValue{Kind: store.ValueString, String: s}, nil
		}
	}
	return store.FilterValue{}, refuse(typeInvalidFilter, "%v compares with a %s, not %v", path, kindName[kind], describeValue(value))
}

var kindName = map[store.ValueKind]string{store.ValueString: "string", store.ValueBool: "boolean", store.ValueTime: "dateTime string", store.ValueInt: "string"}

func describeValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%v", v)
}

// present holds for the users that have a value of field: its identity fields' "" is none.
func present(field store.FilterField) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: field, Cmp: store.CompareNotEqual, Value: store.FilterValue{Kind: store.ValueString}}
}

// isPresent reports whether f is present(field).
func isPresent(f store.Filter, field store.FilterField) bool {
	return f.Op == store.FilterCompare && f.Field == field && f.Cmp == store.CompareNotEqual &&
		f.Value.Kind == store.ValueString && f.Value.String == "" && f.Value.Match == store.MatchWhole
}

// truth is a filter that holds for every user or for none: a comparison of the id with a value
// beyond every id's, which a store answers without reading a row.
func truth(holds bool) store.Filter {
	cmp := store.CompareEqual
	if holds {
		cmp = store.CompareNotEqual
	}
	return store.Filter{Op: store.FilterCompare, Field: store.FieldID, Cmp: cmp, Value: store.FilterValue{Kind: store.ValueInt, Int: math.MaxInt64}}
}

// constant compares an attribute whose value is the same for every user.
func constant(op filter.CompareOperator, value any, is string, path filter.AttributePath) (store.Filter, error) {
	s, ok := value.(string)
	if !ok && op != filter.PR {
		return store.Filter{}, refuse(typeInvalidFilter, "%v compares with a string, not %v", path, describeValue(value))
	}
	switch strings.ToLower(string(op)) {
	case "pr":
		return truth(true), nil
	case "eq":
		return truth(strings.EqualFold(s, is)), nil
	case "ne":
		return truth(!strings.EqualFold(s, is)), nil
	}
	return store.Filter{}, refuse(typeInvalidFilter, "%v compares only with eq, ne and pr", path)
}

// subConstant compares a sub-attribute of the one value usersd keeps of a multi-valued attribute
// (its type, or primary): it holds for the users that have the value, when the value's
// sub-attribute compares as asked.
func subConstant(op filter.CompareOperator, value any, is any, path filter.AttributePath, field store.FilterField) (store.Filter, error) {
	var holds bool
	switch strings.ToLower(string(op)) {
	case "pr":
		holds = true
	case "eq", "ne":
		switch want := is.(type) {
		case string:
			s, ok := value.(string)
			if !ok {
				return store.Filter{}, refuse(typeInvalidFilter, "%v compares with a string, not %v", path, describeValue(value))
			}
			holds = strings.EqualFold(s, want)
		case bool:
			v, ok := looseBoolOf(value)
			if !ok {
				return store.Filter{}, refuse(typeInvalidFilter, "%v compares with a boolean, not %v", path, describeValue(value))
			}
			holds = v == want
		}
		if strings.EqualFold(string(op), "ne") {
			holds = !holds
		}
	default:
		return store.Filter{}, refuse(typeInvalidFilter, "%v compares only with eq, ne and pr", path)
	}
	if !holds {
		return truth(false), nil
	}
	return present(field), nil
}

// subAttributeInside rewrites each comparison of a value path's sub-attribute, which identity
// providers send although RFC 7644's filter grammar has no place for it
// (emails[type eq "work"].value eq "ada@example.com"), into what it means for usersd, which keeps
// one value of each multi-valued attribute: that value meets the value filter, and its
// sub-attribute the comparison (emails[type eq "work"] and emails[value eq "ada@example.com"]).
// AND binds tighter than OR, so the pair stays one term wherever it stands. Text in quotes is left
// alone; a filter without such a comparison comes back as it was.
func subAttributeInside(text string) string {
	var out strings.Builder
	attribute := "" // the attribute of the latest "[" outside quotes
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == '"':
			end := quotedEnd(text, i)
			out.WriteString(text[i:end])
			i = end
			continue
		case c == '[':
			start := i
			for start > 0 && (isNameByte(text[start-1]) || text[start-1] == ':' || text[start-1] == '.') {
				start--
			}
			attribute = text[start:i]
		case c == ']' && i+1 < len(text) && text[i+1] == '.' && attribute != "":
			sub := i + 2
			for sub < len(text) && isNameByte(text[sub]) {
				sub++
			}
			end, ok := comparisonEnd(text, sub)
			if sub > i+2 && ok {
				out.WriteString("] and " + attribute + "[" + text[i+2:end] + "]")
				i = end
				continue
			}
		}
		out.WriteByte(c)
		i++
	}
	return out.String()
}

// quotedEnd is the index just after the string that opens at text[start], a quote; len(text) if
// it never closes.
func quotedEnd(text string, start int) int {
	for i := start + 1; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(text)
}

// comparisonEnd is the end of " op value" (or " pr") that follows a sub-attribute at text[from:].
func comparisonEnd(text string, from int) (int, bool) {
	i := from
	for i < len(text) && text[i] == ' ' {
		i++
	}
	opStart := i
	for i < len(text) && isNameByte(text[i]) {
		i++
	}
	if i-opStart != 2 {
		return 0, false
	}
	if strings.EqualFold(text[opStart:i], "pr") {
		return i, true
	}
	for i < len(text) && text[i] == ' ' {
		i++
	}
	if i == opStart+2 || i >= len(text) {
		return 0, false
	}
	if text[i] == '"' {
		return quotedEnd(text, i), true
	}
	start := i
	for i < len(text) && text[i] != ' ' && text[i] != ')' && text[i] != ']' {
		i++
	}
	return i, i > start
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
