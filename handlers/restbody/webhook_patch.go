// JSON merge patch (RFC 7396) for webhook subscriptions: a patch becomes the subscription and update
// mask of UpdateWebhook.
package restbody

import (
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/codec"
	"usersd/users"
)

// WebhookMergePatch reads a merge patch of a subscription. Every member it names goes into the
// mask: a value sets the field, null removes it (for role: changes of every role are sent; for
// types: every type is). A subscription cannot be without a URL, and enabled is true or false, so
// null is refused for those two. Output-only members are ignored, as in every body; the id stays,
// for UpdateWebhook to compare with the path. The mask is never nil, so an empty patch changes
// nothing.
func WebhookMergePatch(body []byte) (*usersv1.Webhook, *fieldmaskpb.FieldMask, error) {
	webhook := &usersv1.Webhook{}
	fields := webhook.ProtoReflect().Descriptor().Fields()
	body = WithoutOutputOnly(body, webhook.ProtoReflect().Descriptor(), "id")
	// The strict codec checks types, unknown and repeated members, and that the patch is an object.
	if err := codec.UnmarshalJSON(body, webhook); err != nil {
		return nil, nil, users.InvalidField("body", "%v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, nil, fmt.Errorf("re-read a merge patch that protojson accepted: %w", err)
	}
	mask := &fieldmaskpb.FieldMask{Paths: []string{}}
	for member, value := range members {
		field := fieldByJSONMember(fields, member)
		if field == nil {
			return nil, nil, fmt.Errorf("merge patch member %q accepted by protojson but not found", member)
		}
		if users.IsOutputOnly(field) {
			continue
		}
		name := string(field.Name())
		if string(value) == "null" && (name == "url" || name == "enabled") {
			return nil, nil, users.InvalidField(name, "%s cannot be removed: send a value (false disables the subscription)", name)
		}
		mask.Paths = append(mask.Paths, name)
	}
	slices.Sort(mask.Paths)
	return webhook, mask, nil
}
