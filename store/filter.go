// The filter of a list of users (the contract's ListUsersRequest.filter, Google AIP-160), as the
// rules hand it to a store: already parsed and type-checked, a tree of comparisons of one field
// with one typed value. A store turns it into its query language with every value bound as a
// parameter; it never sees the filter's text.
package store

import "time"

// FilterOp says what a node of a Filter is.
type FilterOp uint8

const (
	// FilterCompare compares Field (for FieldLabel, the label Key) with Value by Cmp.
	FilterCompare FilterOp = iota + 1
	// FilterHasLabel holds for a user that has the label Key, whatever its value.
	FilterHasLabel
	// FilterAnd holds when every one of Args holds (two or more).
	FilterAnd
	// FilterOr holds when any one of Args holds (two or more).
	FilterOr
	// FilterNot holds when its one argument, Args[0], does not.
	FilterNot
)

// FilterField is a field of a user that a filter compares.
type FilterField uint8

// The fields a filter may name, with the kind of value each compares with.
const (
	FieldID         FilterField = iota + 1 // ValueInt
	FieldName                              // ValueString, exact (case-sensitive)
	FieldRole                              // ValueString, exact
	FieldUserName                          // ValueString, ignoring case (NameKey)
	FieldEmail                             // ValueString, ignoring case (NameKey)
	FieldExternalID                        // ValueString, exact
	FieldActive                            // ValueBool (=, != only)
	FieldCreatedAt                         // ValueTime
	FieldUpdatedAt                         // ValueTime
	FieldLabel                             // ValueString, the value of the label Key (=, != only); a user without the label matches neither
	FieldGivenName                         // ValueString, exact; no index
	FieldFamilyName                        // ValueString, exact; no index
)

// Comparison is the operator of a FilterCompare.
type Comparison uint8

const (
	CompareEqual Comparison = iota + 1
	CompareNotEqual
	CompareLess
	CompareLessOrEqual
	CompareGreater
	CompareGreaterOrEqual
)

// ValueKind is the kind of a FilterValue.
type ValueKind uint8

const (
	ValueInt ValueKind = iota + 1
	ValueString
	ValueBool
	ValueTime
)

// FilterValue is the literal a comparison compares with.
type FilterValue struct {
	Kind ValueKind
	Int  int64
	// String is the text of a ValueString: with a Match other than MatchWhole, the part of the
	// field that it matches (the prefix of AIP-160's "abc*", less its star).
	String string
	Match  Match
	Bool   bool
	Time   time.Time
}

// Match is how a ValueString matches a field: as the whole of it, or as a part. Only CompareEqual
// takes a part, and never of a label.
type Match uint8

const (
	MatchWhole  Match = iota // the field is the value
	MatchPrefix              // the field starts with the value (AIP-160's "abc*", SCIM's sw): a range of an index
	MatchSuffix              // the field ends with the value (SCIM's ew): every user in the list is tested
	MatchInside              // the field contains the value (SCIM's co): every user in the list is tested
)

// Filter is one node of a filter's tree (see FilterOp). The rules build only well-formed trees: a
// comparison's value has its field's kind, and a Match other than MatchWhole comes only with
// CompareEqual on a string field other than a label.
type Filter struct {
	Op    FilterOp
	Args  []Filter
	Field FilterField
	// Key is the label's key, for FieldLabel and FilterHasLabel.
	Key   string
	Cmp   Comparison
	Value FilterValue
}
