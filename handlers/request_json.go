// A direct JSON decoder for the one request that reads are made of: GetUserRequest, as every
// Connect JSON client sends it, {"id":N}. What protojson's reflection-driven decoder cost a Connect
// GetUser for those eight bytes is measured in docs/PERFORMANCE.md ("What changed since the first
// run"). Any other form (spaces, the id as a string, other fields) goes to protojson, which decides it.
package handlers

import (
	"strconv"

	usersv1 "usersd/gen/users/v1"
)

// decodeGetUserRequest sets req from data when data is exactly {"id":N}, N an int32 written as JSON
// writes integers (no leading zeros, no plus sign). It reports whether it did.
func decodeGetUserRequest(data []byte, req *usersv1.GetUserRequest) bool {
	const prefix, suffix = `{"id":`, `}`
	if len(data) <= len(prefix)+len(suffix) || string(data[:len(prefix)]) != prefix || data[len(data)-1] != '}' {
		return false
	}
	number := data[len(prefix) : len(data)-1]
	digits := number
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 10 || (digits[0] == '0' && len(number) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	id, err := strconv.ParseInt(string(number), 10, 32)
	if err != nil {
		return false
	}
	req.Reset()
	req.Id = int32(id)
	return true
}
