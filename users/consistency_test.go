package users

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"usersd/store"
)

func TestConsistencyTokensReadBackWhatTheyHold(t *testing.T) {
	for _, p := range []store.Position{0, 1, 0x16b3748, 1<<64 - 1} {
		call := &Call{}
		s := &Service{store: positionStore{p: p}}
		s.answerToken(WithCall(t.Context(), call))
		answered := call.AnsweredToken
		got, err := parseConsistencyToken(answered)
		if err != nil || got != p {
			t.Errorf("position %d: token %q reads back as %d, %v", p, answered, got, err)
		}
		read, err := forRead(WithCall(t.Context(), &Call{ConsistencyToken: answered}))
		if err != nil {
			t.Fatal(err)
		}
		// A token without a position (a store without standbys) sends the read to the primary.
		if f := store.FreshnessOf(read); f.After != p || f.Primary != (p == 0) {
			t.Errorf("position %d: a read with its token requires %+v", p, f)
		}
	}
}

func TestAReadWithoutATokenRequiresNothingAndAWriteReadsThePrimary(t *testing.T) {
	read, err := forRead(t.Context())
	if err != nil || store.FreshnessOf(read) != (store.Freshness{}) {
		t.Errorf("a read without a token requires %+v, %v", store.FreshnessOf(read), err)
	}
	conditional, _ := forRead(WithCall(t.Context(), &Call{Primary: true}))
	if !store.FreshnessOf(conditional).Primary {
		t.Error("a conditional read may be served by a standby")
	}
	write, err := forWrite(t.Context())
	if err != nil || !store.FreshnessOf(write).Primary {
		t.Errorf("what a write reads requires %+v, %v; want the primary", store.FreshnessOf(write), err)
	}
	_, err = forWrite(WithCall(t.Context(), &Call{ConsistencyToken: "nonsense"}))
	if e := new(Error); !errors.As(err, &e) || e.Code() != connect.CodeInvalidArgument {
		t.Errorf("a write with a malformed token: %v, want invalid_argument", err)
	}
}

// positionStore is a store whose only answer is its position; answerToken asks for nothing else.
type positionStore struct {
	store.Store
	p store.Position
}

func (s positionStore) Position(ctx context.Context) (store.Position, error) { return s.p, nil }
