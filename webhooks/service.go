package webhooks

import (
	"context"
	"errors"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/store"
	"usersd/users"
)

// secretOverlap is how long a rotated secret still signs beside the new one.
const secretOverlap = 24 * time.Hour

// recentAttempts is how many attempts ListWebhookDeliveries answers.
const recentAttempts = 100

// Service is the Webhooks RPC service: the rules of subscriptions. Every face (REST, the RPC
// protocols) calls it; the route table requires webhooks.manage for all of it.
type Service struct {
	store  Store
	policy Policy
	// changed is called after a caller made, changed or replayed a subscription (see OnChange).
	changed func()
}

var _ usersv1connect.WebhooksHandler = (*Service)(nil)

// NewService returns the service of st's subscriptions, whose URLs policy checks.
func NewService(st Store, policy Policy) *Service {
	return &Service{store: st, policy: policy, changed: func() {}}
}

// OnChange has f called after each subscription a caller makes, changes or replays: Engine.Poke,
// so that this process's engine takes it up at once.
func (s *Service) OnChange(f func()) { s.changed = f }

func (s *Service) CreateWebhook(ctx context.Context, req *usersv1.CreateWebhookRequest) (*usersv1.CreateWebhookResponse, error) {
	w := req.GetWebhook()
	if err := s.checkURL(ctx, w.GetUrl()); err != nil {
		return nil, err
	}
	if err := checkTypes(w.GetTypes()); err != nil {
		return nil, err
	}
	if err := users.CheckRole("webhook.role", w.GetRole()); err != nil {
		return nil, err
	}
	created, err := s.store.CreateWebhook(ctx, store.Webhook{URL: w.GetUrl(), Types: dedupe(w.GetTypes()), Role: w.GetRole(), Secret: newSecret()})
	if err != nil {
		return nil, storeError(err, 0)
	}
	s.changed()
	return &usersv1.CreateWebhookResponse{Webhook: s.withSecret(ctx, created)}, nil
}

func (s *Service) ListWebhooks(ctx context.Context, _ *usersv1.ListWebhooksRequest) (*usersv1.ListWebhooksResponse, error) {
	list, err := s.store.ListWebhooks(ctx)
	if err != nil {
		return nil, storeError(err, 0)
	}
	latest := s.latest(ctx)
	out := &usersv1.ListWebhooksResponse{}
	for _, w := range list {
		out.Webhooks = append(out.Webhooks, toProto(w, latest))
	}
	return out, nil
}

func (s *Service) GetWebhook(ctx context.Context, req *usersv1.GetWebhookRequest) (*usersv1.GetWebhookResponse, error) {
	if err := checkID(req.GetId()); err != nil {
		return nil, err
	}
	w, err := s.store.GetWebhook(ctx, req.GetId())
	if err != nil {
		return nil, storeError(err, req.GetId())
	}
	return &usersv1.GetWebhookResponse{Webhook: toProto(w, s.latest(ctx))}, nil
}

func (s *Service) UpdateWebhook(ctx context.Context, req *usersv1.UpdateWebhookRequest) (*usersv1.UpdateWebhookResponse, error) {
	if err := checkID(req.GetId()); err != nil {
		return nil, err
	}
	w := req.GetWebhook()
	if w.GetId() != 0 && w.GetId() != req.GetId() {
		return nil, users.InvalidField("webhook.id", "webhook.id %d in the body does not match %d in the request; leave it out or make it equal", w.GetId(), req.GetId())
	}
	paths := req.GetUpdateMask().GetPaths()
	if req.GetUpdateMask() == nil { // every field the message populates
		if w.GetUrl() != "" {
			paths = append(paths, "url")
		}
		if len(w.GetTypes()) > 0 {
			paths = append(paths, "types")
		}
		if w.GetRole() != "" {
			paths = append(paths, "role")
		}
		if w.GetEnabled() { // false is proto3's unset: a disable names "enabled" in the mask
			paths = append(paths, "enabled")
		}
	}
	var changes store.WebhookChanges
	for _, path := range paths {
		switch path {
		case "url":
			if err := s.checkURL(ctx, w.GetUrl()); err != nil {
				return nil, err
			}
			changes.URL = new(w.GetUrl())
		case "types":
			if err := checkTypes(w.GetTypes()); err != nil {
				return nil, err
			}
			changes.Types = new(dedupe(w.GetTypes()))
		case "role":
			if err := users.CheckRole("webhook.role", w.GetRole()); err != nil {
				return nil, err
			}
			changes.Role = new(w.GetRole())
		case "enabled":
			changes.Enabled = new(w.GetEnabled())
		default:
			return nil, users.InvalidField("update_mask", "update_mask: %q is not a field a caller may set; name url, types, role or enabled", path)
		}
	}
	updated, err := s.store.UpdateWebhook(ctx, req.GetId(), changes)
	if err != nil {
		return nil, storeError(err, req.GetId())
	}
	s.changed()
	return &usersv1.UpdateWebhookResponse{Webhook: toProto(updated, s.latest(ctx))}, nil
}

func (s *Service) DeleteWebhook(ctx context.Context, req *usersv1.DeleteWebhookRequest) (*usersv1.DeleteWebhookResponse, error) {
	if err := checkID(req.GetId()); err != nil {
		return nil, err
	}
	if err := s.store.DeleteWebhook(ctx, req.GetId()); err != nil {
		return nil, storeError(err, req.GetId())
	}
	return &usersv1.DeleteWebhookResponse{}, nil
}

func (s *Service) RotateWebhookSecret(ctx context.Context, req *usersv1.RotateWebhookSecretRequest) (*usersv1.RotateWebhookSecretResponse, error) {
	if err := checkID(req.GetId()); err != nil {
		return nil, err
	}
	rotated, err := s.store.RotateWebhookSecret(ctx, req.GetId(), newSecret(), time.Now().Add(secretOverlap))
	if err != nil {
		return nil, storeError(err, req.GetId())
	}
	return &usersv1.RotateWebhookSecretResponse{Webhook: s.withSecret(ctx, rotated)}, nil
}

func (s *Service) ListWebhookDeliveries(ctx context.Context, req *usersv1.ListWebhookDeliveriesRequest) (*usersv1.ListWebhookDeliveriesResponse, error) {
	if err := checkID(req.GetId()); err != nil {
		return nil, err
	}
	if _, err := s.store.GetWebhook(ctx, req.GetId()); err != nil {
		return nil, storeError(err, req.GetId())
	}
	attempts, err := s.store.WebhookDeliveries(ctx, req.GetId(), recentAttempts)
	if err != nil {
		return nil, storeError(err, req.GetId())
	}
	out := &usersv1.ListWebhookDeliveriesResponse{}
	for _, a := range attempts {
		d := &usersv1.WebhookDelivery{Sequence: a.Sequence, Status: a.Status, Latency: durationpb.New(a.Latency),
			Error: a.Error, AttemptTime: timestamppb.New(a.At)}
		if !a.NextAttempt.IsZero() {
			d.NextAttemptTime = timestamppb.New(a.NextAttempt)
		}
		out.Deliveries = append(out.Deliveries, d)
	}
	return out, nil
}

func (s *Service) ReplayWebhook(ctx context.Context, req *usersv1.ReplayWebhookRequest) (*usersv1.ReplayWebhookResponse, error) {
	if err := checkID(req.GetId()); err != nil {
		return nil, err
	}
	if req.GetAfterSequence() < 0 {
		return nil, users.InvalidField("after_sequence", "after_sequence must be 0 or more, got %d", req.GetAfterSequence())
	}
	latest := s.latest(ctx)
	if req.GetAfterSequence() > latest {
		return nil, users.InvalidField("after_sequence", "after_sequence %d is after the newest change, %d", req.GetAfterSequence(), latest)
	}
	replayed, err := s.store.ReplayWebhook(ctx, req.GetId(), req.GetAfterSequence())
	if errors.Is(err, store.ErrEventsSwept) {
		return nil, users.NewError(connect.CodeFailedPrecondition, users.ReasonChangesNotKept,
			"the changes after sequence %d are no longer kept; replay from a later one", req.GetAfterSequence())
	}
	if err != nil {
		return nil, storeError(err, req.GetId())
	}
	s.changed()
	return &usersv1.ReplayWebhookResponse{Webhook: toProto(replayed, latest)}, nil
}

// checkURL checks a URL against the policy, as a client error.
func (s *Service) checkURL(ctx context.Context, url string) error {
	if url == "" {
		return users.InvalidField("webhook.url", "webhook.url is required: the https URL to send the changes to")
	}
	if err := s.policy.checkURL(ctx, url); err != nil {
		return users.InvalidField("webhook.url", "webhook.%s", err.Error())
	}
	return nil
}

func checkTypes(types []string) error {
	for _, t := range types {
		if !knownType(t) {
			return users.InvalidField("webhook.types", "webhook.types: %q is not a type of change; name dev.usersd.user.created, .updated, .deleted, .undeleted or .purged", t)
		}
	}
	return nil
}

func checkID(id int32) error {
	if id <= 0 {
		return users.InvalidField("id", "id must be a positive integer, got %d", id)
	}
	return nil
}

func dedupe(types []string) []string {
	out := slices.Clone(types)
	slices.Sort(out)
	return slices.Compact(out)
}

// storeError is a store error as the client sees it: a missing subscription is named.
func storeError(err error, id int32) error {
	if errors.Is(err, store.ErrNotFound) {
		return users.NewError(connect.CodeNotFound, users.ReasonWebhookNotFound, "no webhook subscription has id %d", id)
	}
	return users.FromStore(err)
}

// latest is the newest sequence of the log, for the subscriptions' lag; 0 when it cannot be read.
func (s *Service) latest(ctx context.Context) int64 {
	page, err := s.store.UserEvents(ctx, -1, 0)
	if err != nil {
		return 0
	}
	return page.Latest
}

func (s *Service) withSecret(ctx context.Context, w store.Webhook) *usersv1.Webhook {
	m := toProto(w, s.latest(ctx))
	m.Secret = w.Secret
	return m
}

// toProto is a subscription as its callers see it: never its secrets.
func toProto(w store.Webhook, latest int64) *usersv1.Webhook {
	m := &usersv1.Webhook{
		Id: w.ID, Url: w.URL, Types: w.Types, Role: w.Role, Enabled: w.Enabled, DisabledReason: w.DisabledReason,
		DeliveredSequence: w.Delivered, LatestSequence: max(latest, w.Delivered), FailedAttempts: w.FailedAttempts,
		CreateTime: timestamppb.New(w.Created), UpdateTime: timestamppb.New(w.Updated),
	}
	if !w.NextAttempt.IsZero() {
		m.NextAttemptTime = timestamppb.New(w.NextAttempt)
	}
	return m
}
