// The filter of ListUsers (ListUsersRequest.filter, Google AIP-160): its text parsed and
// type-checked into the store's typed tree, store.Filter. The text never goes further than this
// file: a store gets only fields, operators and typed values, which it binds as parameters.
package users

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.einride.tech/aip/filtering"
	expr "google.golang.org/genproto/googleapis/api/expr/v1alpha1"

	"usersd/store"
)

// The limits of the contract: they bound the work of a parse and the size of the query a store
// builds from it, whatever a client sends.
const (
	maxFilterBytes       = 2000
	maxFilterComparisons = 32
	// maxFilterNesting counts the AND, OR and NOT above a comparison, once AND and OR chains are
	// flattened: "a AND b AND c" is one level, as are redundant parentheses (none).
	maxFilterNesting = 8
)

// filterFields are the fields a filter names, by their proto and their JSON names (as sort and
// update_mask take both). labels.KEY is apart: see filterBuilder.field.
var filterFields = map[string]store.FilterField{
	"id":          store.FieldID,
	"name":        store.FieldName,
	"role":        store.FieldRole,
	"user_name":   store.FieldUserName,
	"userName":    store.FieldUserName,
	"email":       store.FieldEmail,
	"external_id": store.FieldExternalID,
	"externalId":  store.FieldExternalID,
	"active":      store.FieldActive,
	"created_at":  store.FieldCreatedAt,
	"createdAt":   store.FieldCreatedAt,
	"updated_at":  store.FieldUpdatedAt,
	"updatedAt":   store.FieldUpdatedAt,
}

const filterFieldList = "id, name, role, user_name, email, external_id, active, created_at, updated_at or labels.KEY"

// filterComparisons maps the parser's comparison functions to the store's.
var filterComparisons = map[string]store.Comparison{
	filtering.FunctionEquals:        store.CompareEqual,
	filtering.FunctionNotEquals:     store.CompareNotEqual,
	filtering.FunctionLessThan:      store.CompareLess,
	filtering.FunctionLessEquals:    store.CompareLessOrEqual,
	filtering.FunctionGreaterThan:   store.CompareGreater,
	filtering.FunctionGreaterEquals: store.CompareGreaterOrEqual,
}

// parseFilter parses and checks a ListUsers filter. An empty (or blank) filter is nil: no filter.
// Every refusal is InvalidField("filter", ...) saying where, by column (in characters, from 1) and
// by the offending text.
//
// einride's filtering.Parser does the grammar: lexing, string escapes, the precedence of AIP-160
// (OR binds tighter than AND), NOT and "-", parentheses and member access, with the byte offset of
// every node. Its Checker is not used: it types by overloads of declared functions, so it cannot
// say that labels.KEY or active take only = and !=, that an id must fit int32, that "abc*" is a
// prefix only with =, or that a label key must have the label syntax; and its errors carry no
// position. So the type checking is done here, in the one walk that builds the store's tree.
func parseFilter(text string) (*store.Filter, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	if len(text) > maxFilterBytes {
		return nil, InvalidField("filter", "filter is %d bytes long; at most %d are allowed", len(text), maxFilterBytes)
	}
	var p filtering.Parser
	p.Init(text)
	parsed, err := p.Parse()
	if err != nil {
		return nil, filterSyntaxError(text, err)
	}
	b := filterBuilder{
		text: text,
		// The parser trims the text first: its offsets count from the first non-space.
		lead:      len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace)),
		positions: parsed.GetSourceInfo().GetPositions(),
	}
	f, _, err := b.condition(parsed.GetExpr())
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// filterBuilder builds a store.Filter from the parser's tree, counting comparisons as it goes.
type filterBuilder struct {
	text        string
	lead        int
	positions   map[int64]int32
	comparisons int
}

// offset is where the node e starts in the filter, in bytes from 0.
func (b *filterBuilder) offset(e *expr.Expr) int {
	return min(max(b.lead+int(b.positions[e.GetId()]), 0), len(b.text))
}

// column is where the node e starts in the filter, in characters from 1.
func (b *filterBuilder) column(e *expr.Expr) int { return b.columnAt(b.offset(e)) }

func (b *filterBuilder) columnAt(offset int) int {
	return utf8.RuneCountInString(b.text[:offset]) + 1
}

func (b *filterBuilder) errorf(e *expr.Expr, format string, args ...any) error {
	return InvalidField("filter", "filter, column %d: %s", b.column(e), fmt.Sprintf(format, args...))
}

// condition builds the node of e, which must hold or not: AND, OR, NOT or a comparison. It returns
// the node's depth (1 for a comparison) to enforce maxFilterNesting.
func (b *filterBuilder) condition(e *expr.Expr) (store.Filter, int, error) {
	call := e.GetCallExpr()
	if call == nil {
		return store.Filter{}, 0, b.errorf(e, "%s is not a comparison (write a field, an operator and a value, like name = \"Ada\")", describe(e))
	}
	args := call.GetArgs()
	switch fn := call.GetFunction(); fn {
	case filtering.FunctionAnd, filtering.FunctionOr:
		// einride also parses AND, OR and NOT written as functions, AND((a = 1), (b = 2)): the
		// same tree, so the same meaning, but the arguments are counted here.
		if len(args) < 2 {
			return store.Filter{}, 0, b.errorf(e, "%s takes two conditions", fn)
		}
		op := store.FilterAnd
		if fn == filtering.FunctionOr {
			op = store.FilterOr
		}
		// The parser nests a chain two by two; the store gets it flat: a AND b AND c is one AND of
		// three, so that a long chain does not count as deep nesting.
		node := store.Filter{Op: op}
		depth := 0
		for _, arg := range args {
			f, d, err := b.condition(arg)
			if err != nil {
				return store.Filter{}, 0, err
			}
			if f.Op == op {
				node.Args = append(node.Args, f.Args...)
				d-- // its arguments join this node: they are no deeper than they were
			} else {
				node.Args = append(node.Args, f)
			}
			depth = max(depth, d)
		}
		depth, err := b.nested(e, depth+1)
		return node, depth, err
	case filtering.FunctionNot:
		if len(args) != 1 {
			return store.Filter{}, 0, b.errorf(e, "NOT takes one condition")
		}
		f, d, err := b.condition(args[0])
		if err != nil {
			return store.Filter{}, 0, err
		}
		d, err = b.nested(e, d+1)
		return store.Filter{Op: store.FilterNot, Args: []store.Filter{f}}, d, err
	case filtering.FunctionFuzzyAnd:
		// AIP-160 leaves the meaning of conditions side by side to the service; this one asks
		// for AND or OR rather than guess.
		if len(args) < 2 {
			// FUZZY() written as a call: the parser takes the call form of every function.
			return store.Filter{}, 0, b.errorf(e, "write AND or OR (in capitals) between two conditions")
		}
		return store.Filter{}, 0, b.errorf(args[len(args)-1], "write AND or OR (in capitals) between two conditions")
	case filtering.FunctionHas:
		f, err := b.has(e, args)
		return f, 1, err
	}
	cmp, ok := filterComparisons[call.GetFunction()]
	if !ok || len(args) != 2 {
		return store.Filter{}, 0, b.errorf(e, "unknown function %s (a filter compares fields with =, !=, <, <=, >, >= and :)", quoted(call.GetFunction()))
	}
	f, err := b.compare(e, cmp, args[0], args[1])
	return f, 1, err
}

// nested checks a node's depth against maxFilterNesting, and returns it.
func (b *filterBuilder) nested(e *expr.Expr, depth int) (int, error) {
	if depth > maxFilterNesting+1 {
		return 0, b.errorf(e, "filter nests more than %d levels of AND, OR and NOT", maxFilterNesting)
	}
	return depth, nil
}

// counted counts one more comparison against maxFilterComparisons.
func (b *filterBuilder) counted(e *expr.Expr) error {
	b.comparisons++
	if b.comparisons > maxFilterComparisons {
		return b.errorf(e, "filter has more than %d comparisons", maxFilterComparisons)
	}
	return nil
}

// has builds "labels:KEY" and "labels.KEY:*", the two forms of ":" that the contract serves.
func (b *filterBuilder) has(e *expr.Expr, args []*expr.Expr) (store.Filter, error) {
	if len(args) != 2 {
		return store.Filter{}, b.errorf(e, "\":\" takes a field and a value")
	}
	if err := b.counted(e); err != nil {
		return store.Filter{}, err
	}
	lhs, rhs := args[0], args[1]
	name, _ := dottedName(lhs)
	var key *expr.Expr // the node that names the key, for the error
	var keyText string
	switch {
	case name == "labels":
		// The parser turns a bare word after ":" into a string; a dotted one it leaves a member.
		if s, ok := rhs.GetConstExpr().GetConstantKind().(*expr.Constant_StringValue); ok {
			key, keyText = rhs, s.StringValue
		} else if dotted, ok := dottedName(rhs); ok {
			key, keyText = rhs, dotted
		}
	case strings.HasPrefix(name, "labels."):
		if rhs.GetConstExpr().GetStringValue() == "*" {
			key, keyText = lhs, strings.TrimPrefix(name, "labels.")
		}
	}
	if key == nil {
		return store.Filter{}, b.errorf(e, "\":\" (has) serves only labels:KEY and labels.KEY:*")
	}
	if err := b.labelKey(key, keyText); err != nil {
		return store.Filter{}, err
	}
	return store.Filter{Op: store.FilterHasLabel, Key: keyText}, nil
}

func (b *filterBuilder) labelKey(e *expr.Expr, key string) error {
	if !labelKey.MatchString(key) {
		return b.errorf(e, "the label key %s must be 1 to 63 characters of a-z, 0-9, _, . and -, starting with a letter", quoted(key))
	}
	return nil
}

// compare builds "field cmp value": the field on the left, a literal of its kind on the right.
func (b *filterBuilder) compare(e *expr.Expr, cmp store.Comparison, lhs, rhs *expr.Expr) (store.Filter, error) {
	if err := b.counted(e); err != nil {
		return store.Filter{}, err
	}
	f := store.Filter{Op: store.FilterCompare, Cmp: cmp}
	name, ok := dottedName(lhs)
	if !ok {
		return store.Filter{}, b.errorf(lhs, "%s is not a field: a comparison starts with one of %s", describe(lhs), filterFieldList)
	}
	if key, isLabel := strings.CutPrefix(name, "labels."); isLabel {
		if err := b.labelKey(lhs, key); err != nil {
			return store.Filter{}, err
		}
		f.Field, f.Key = store.FieldLabel, key
	} else if name == "labels" {
		return store.Filter{}, b.errorf(lhs, "a label compares as labels.KEY = \"value\" (or labels:KEY tests that it is there)")
	} else if f.Field, ok = filterFields[name]; !ok {
		return store.Filter{}, b.errorf(lhs, "unknown field %s; filter by %s", quoted(name), filterFieldList)
	}
	if (f.Field == store.FieldLabel || f.Field == store.FieldActive) && cmp != store.CompareEqual && cmp != store.CompareNotEqual {
		return store.Filter{}, b.errorf(e, "%s compares only with = and !=", name)
	}
	v, err := b.value(name, f.Field, cmp, rhs)
	if err != nil {
		return store.Filter{}, err
	}
	f.Value = v
	return f, nil
}

// value reads the literal rhs as a value of field's kind.
func (b *filterBuilder) value(name string, field store.FilterField, cmp store.Comparison, rhs *expr.Expr) (store.FilterValue, error) {
	wrong := func(want string) error {
		return b.errorf(rhs, "%s compares with %s, not %s", name, want, describe(rhs))
	}
	c := rhs.GetConstExpr()
	switch field {
	case store.FieldID:
		i, ok := c.GetConstantKind().(*expr.Constant_Int64Value)
		if !ok {
			return store.FilterValue{}, wrong("an integer")
		}
		// The parser reads integers as Go does, so 010 would be 8: refused rather than read
		// otherwise than most people would.
		if digits := strings.TrimPrefix(b.text[b.offset(rhs):], "-"); len(digits) > 1 && digits[0] == '0' && '0' <= digits[1] && digits[1] <= '9' {
			return store.FilterValue{}, b.errorf(rhs, "write the id without leading zeros")
		}
		if i.Int64Value < math.MinInt32 || i.Int64Value > math.MaxInt32 {
			return store.FilterValue{}, b.errorf(rhs, "id %d is out of range: ids are 32-bit integers", i.Int64Value)
		}
		return store.FilterValue{Kind: store.ValueInt, Int: i.Int64Value}, nil
	case store.FieldActive:
		// true and false are words to the parser, as field names are.
		if w := rhs.GetIdentExpr().GetName(); w == "true" || w == "false" {
			return store.FilterValue{Kind: store.ValueBool, Bool: w == "true"}, nil
		}
		return store.FilterValue{}, wrong("true or false")
	case store.FieldCreatedAt, store.FieldUpdatedAt:
		s, ok := c.GetConstantKind().(*expr.Constant_StringValue)
		if !ok {
			return store.FilterValue{}, wrong("an RFC 3339 time in quotes (like \"2026-01-01T00:00:00Z\")")
		}
		t, err := time.Parse(time.RFC3339Nano, s.StringValue)
		if err != nil {
			return store.FilterValue{}, b.errorf(rhs, "%s is not an RFC 3339 time, like \"2026-01-01T00:00:00Z\"", quoted(s.StringValue))
		}
		return store.FilterValue{Kind: store.ValueTime, Time: t.UTC()}, nil
	}
	// The string fields: name, role, user_name, email, external_id and the labels.
	s, ok := c.GetConstantKind().(*expr.Constant_StringValue)
	if !ok {
		return store.FilterValue{}, wrong("a string in double quotes")
	}
	// No stored value holds a control character, and a database may refuse to compare with one
	// (PostgreSQL with a NUL): refused here, like the role parameter.
	if !utf8.ValidString(s.StringValue) || strings.ContainsFunc(s.StringValue, unicode.IsControl) {
		return store.FilterValue{}, b.errorf(rhs, "the string %s must be UTF-8 text without control characters", quoted(s.StringValue))
	}
	v := store.FilterValue{Kind: store.ValueString, String: s.StringValue}
	if prefix, ok := strings.CutSuffix(s.StringValue, "*"); ok {
		// "abc*" is a prefix, always: the contract has no escape for a final star.
		if field == store.FieldLabel {
			return store.FilterValue{}, b.errorf(rhs, "%s takes no prefix (%s ends in *): labels compare whole values", name, quoted(s.StringValue))
		}
		if cmp != store.CompareEqual {
			return store.FilterValue{}, b.errorf(rhs, "the prefix %s compares only with =", quoted(s.StringValue))
		}
		v.String, v.Match = prefix, store.MatchPrefix
	}
	return v, nil
}

// dottedName is the name e stands for if it is a word or words joined by dots (a field, or
// labels.KEY, whose key may hold dots itself).
func dottedName(e *expr.Expr) (string, bool) {
	switch k := e.GetExprKind().(type) {
	case *expr.Expr_IdentExpr:
		return k.IdentExpr.GetName(), true
	case *expr.Expr_SelectExpr:
		operand, ok := dottedName(k.SelectExpr.GetOperand())
		return operand + "." + k.SelectExpr.GetField(), ok
	}
	return "", false
}

// describe says what e is, for an error: the offending text as the client wrote it, near enough.
func describe(e *expr.Expr) string {
	if name, ok := dottedName(e); ok {
		return "the word " + quoted(name)
	}
	switch k := e.GetConstExpr().GetConstantKind().(type) {
	case *expr.Constant_StringValue:
		return "the string " + quoted(k.StringValue)
	case *expr.Constant_Int64Value:
		return "the integer " + strconv.FormatInt(k.Int64Value, 10)
	case *expr.Constant_DoubleValue:
		return "the number " + strconv.FormatFloat(k.DoubleValue, 'g', -1, 64)
	}
	if call := e.GetCallExpr(); call != nil {
		return "a condition or function (" + call.GetFunction() + ")"
	}
	return "an expression"
}

// positioned is what einride's lexer and parser errors offer (their types are unexported).
type positioned interface {
	Position() filtering.Position
	Message() string
}

// filterSyntaxError turns a parse error into the client's error. einride nests one error per rule
// of the grammar it was in (expression, sequence, term, ...); the innermost one is where the text
// went wrong, and an error below it (the end of the text, a bad escape) is why.
func filterSyntaxError(text string, err error) error {
	var at positioned
	var cause error
	for e := err; e != nil; e = errors.Unwrap(e) {
		if p, ok := e.(positioned); ok {
			at, cause = p, nil
		} else {
			cause = e
		}
	}
	if at == nil {
		return InvalidField("filter", "filter is not valid AIP-160: %v", err)
	}
	lead := len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace))
	b := filterBuilder{text: text}
	offset := min(max(lead+int(at.Position().Offset), 0), len(text))
	column := b.columnAt(offset)
	why := at.Message()
	switch {
	case errors.Is(cause, io.EOF):
		return InvalidField("filter", "filter, column %d: the filter ends too early, something is missing", column)
	case cause != nil:
		why = cause.Error() // "unable to unescape string" says more than the rule it was in
	}
	return InvalidField("filter", "filter, column %d (%s): not valid AIP-160: %s", column, near(text, offset), why)
}

// near quotes the text from offset, to show where a parse went wrong.
func near(text string, offset int) string {
	if offset >= len(text) {
		return "at the end"
	}
	return "near " + quoted(text[offset:])
}

// quoted quotes s for an error, cut to 40 characters: enough to find it in the filter, and an
// error stays short whatever the filter holds.
func quoted(s string) string {
	if r := []rune(s); len(r) > 40 {
		return strconv.Quote(string(r[:40])) + "..."
	}
	return strconv.Quote(s)
}
