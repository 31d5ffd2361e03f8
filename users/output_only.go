// Output-only fields (AIP-203): the fields that the proto documents as set by the server. A request's
// values for them are ignored, whatever they are, except where a request compares one with the
// resource its path names (checkBodyID: a user's id, a post's user_id).
package users

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	usersv1 "usersd/gen/users/v1"
)

// outputOnlyPostFields are the fields of Post, by proto name, that its comments mark output only.
var outputOnlyPostFields = map[string]bool{"id": true, "user_id": true, "created_at": true}

// outputOnlyWebhookFields are the fields of Webhook, by proto name, that its comments mark output
// only: the service's record of the subscription and its delivery, and the secret it makes.
var outputOnlyWebhookFields = map[string]bool{
	"id": true, "disabled_reason": true, "delivered_sequence": true, "latest_sequence": true, "failed_attempts": true,
	"next_attempt_time": true, "create_time": true, "update_time": true, "secret": true,
}

var (
	userMessage    = (&usersv1.User{}).ProtoReflect().Descriptor().FullName()
	postMessage    = (&usersv1.Post{}).ProtoReflect().Descriptor().FullName()
	webhookMessage = (&usersv1.Webhook{}).ProtoReflect().Descriptor().FullName()
)

// IsOutputOnly reports whether fd is an output-only field of a resource (User, Post or Webhook).
func IsOutputOnly(fd protoreflect.FieldDescriptor) bool {
	switch fd.ContainingMessage().FullName() {
	case userMessage:
		return outputOnlyUserFields[string(fd.Name())]
	case postMessage:
		return outputOnlyPostFields[string(fd.Name())]
	case webhookMessage:
		return outputOnlyWebhookFields[string(fd.Name())]
	}
	return false
}
