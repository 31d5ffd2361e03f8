package main

import (
	"fmt"

	"usersd/store"
)

// seedIdentity is the user name and email of seeded user id, each unique as the schema requires
// (store/sqlstore/migrations: unique ignoring case), so that lookups by either have a full index
// to read: the user name and email columns, with their keys, in the order the seeders write them.
func seedIdentity(id int32) []any {
	userName := fmt.Sprintf("user%d", id)
	email := userName + "@example.com"
	return []any{userName, store.NameKey(userName), email, store.NameKey(email)}
}
