package main

import (
	"usersd/bench/internal/fixture"
	"usersd/store"
)

// identityColumns are the columns that seedIdentity fills, after the columns the seeders always
// wrote.
var identityColumns = []string{"user_name", "user_name_key", "email", "email_key", "external_id", "active", "labels"}

// seedIdentity is the user name, email, external id, active flag and labels of seeded user u (the
// fixture's), each identity unique as the schema requires (store/sqlstore/migrations: unique
// ignoring case), so that lookups by any of them have a full index to read; the user name and email
// come with their keys. activeValue is how the backend writes a boolean.
func seedIdentity(u fixture.User, activeValue func(bool) any) []any {
	userName, email := u.UserName(), u.Email()
	return []any{userName, store.NameKey(userName), email, store.NameKey(email), u.ExternalID(), activeValue(u.Active()), u.Labels()}
}
