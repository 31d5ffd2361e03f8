// The identity fields of a user in SQL: labels as a JSON object in a text column, the arguments of
// an update, the merge of a patch of labels, and the clash of a unique field.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"usersd/store"
)

// encodeLabels is the stored form of labels: a JSON object, its keys sorted (encoding/json sorts
// a map's), "{}" for none.
func encodeLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "{}"
	}
	b, err := json.Marshal(labels)
	if err != nil {
		panic(fmt.Sprintf("encode labels: %v", err)) // a map of strings always encodes
	}
	return string(b)
}

// decodeLabels reads the stored form of labels; nil for none.
func decodeLabels(text string) (map[string]string, error) {
	if text == "{}" || text == "" {
		return nil, nil
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(text), &labels); err != nil {
		return nil, fmt.Errorf("stored labels %q: %w", text, err)
	}
	return labels, nil
}

// identitySize is how many bytes the identity of a new user adds to its write, for the batch's
// bound on its size.
func identitySize(id store.Identity) int {
	n := len(id.UserName) + len(id.GivenName) + len(id.FamilyName) + len(id.Email) + len(id.ExternalID)
	for k, v := range id.Labels {
		n += len(k) + len(v)
	}
	return n
}

// identityArgs are the arguments of an update's identity columns: nil leaves a column as it is.
type identityArgs struct {
	userName, userNameKey, givenName, familyName, email, emailKey, externalID *string
	active                                                                    *bool
	size                                                                      int
}

func identityChanges(c store.UserChanges) identityArgs {
	a := identityArgs{userName: c.UserName, givenName: c.GivenName, familyName: c.FamilyName,
		email: c.Email, externalID: c.ExternalID}
	if c.Inactive != nil {
		active := !*c.Inactive
		a.active = &active
	}
	if c.UserName != nil {
		key := store.NameKey(*c.UserName)
		a.userNameKey = &key
	}
	if c.Email != nil {
		key := store.NameKey(*c.Email)
		a.emailKey = &key
	}
	for _, p := range []*string{c.UserName, c.GivenName, c.FamilyName, c.Email, c.ExternalID} {
		if p != nil {
			a.size += len(*p)
		}
	}
	if c.Labels != nil {
		a.size += len(encodeLabels(*c.Labels))
	}
	for k, v := range c.LabelChanges {
		a.size += len(k)
		if v != nil {
			a.size += len(*v)
		}
	}
	return a
}

// labelsAfter is the stored form of the labels that changes leave user id with, or nil when
// changes leave them alone. A patch of some keys merges with the stored labels, read in the write's
// own transaction (and on PostgreSQL locked until it ends, so that a concurrent patch waits rather
// than being lost); a missing or deleted user leaves the update to find that out, so that it is
// not found rather than refused for labels it cannot be shown to have.
func (s *Store) labelsAfter(ctx context.Context, tx writeTx, id int32, changes store.UserChanges) (*string, error) {
	if changes.Labels == nil && len(changes.LabelChanges) == 0 {
		return nil, nil
	}
	var stored map[string]string
	if changes.Labels == nil {
		var text string
		err := tx.QueryRowContext(ctx, `SELECT labels FROM users WHERE id = $1`+live+s.dialect.forUpdate, id).Scan(&text)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("read the labels of user %d: %w", id, err)
		}
		if stored, err = decodeLabels(text); err != nil {
			return nil, err
		}
	}
	merged := changes.ApplyLabels(stored)
	if len(merged) > store.MaxLabels {
		return nil, fmt.Errorf("user %d would have %d labels, at most %d: %w", id, len(merged), store.MaxLabels, store.ErrTooManyLabels)
	}
	text := encodeLabels(merged)
	return &text, nil
}

// uniqueOr returns the clash of a unique field that err is, as store.Taken, or err as it is.
func (s *Store) uniqueOr(err error) error {
	if field := s.dialect.uniqueField(err); field != "" {
		return fmt.Errorf("%w (%v)", store.Taken{Field: field}, err)
	}
	return err
}
