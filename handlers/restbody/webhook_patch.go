// JSON merge patch (RFC 7396) for webhook subscriptions: a patch becomes the subscription and update
// mask of UpdateWebhook.
package restbody

import (
	"slices"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
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
	members, err := decodePatch(WithoutOutputOnly(body, webhook.ProtoReflect().Descriptor(), "id"), webhook)
	if err != nil {
		return nil, nil, err
	}
	mask := &fieldmaskpb.FieldMask{Paths: []string{}}
	for field, value := range members {
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
