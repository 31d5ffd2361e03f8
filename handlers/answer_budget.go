// The memory budget of answers in flight. An answer is held in memory from the moment it is encoded
// until its client has taken the last byte, and a client that stops reading holds it until the
// write timeout: without a bound, enough stalled streams take the process's memory wherever the
// attacker likes. A list (the only answer that grows large) takes a ticket of the budget before it
// does any work, waiting a moment for one when the budget is spent and refused with 503 /
// unavailable when none comes; once encoded, the ticket becomes the answer's size. Another read's
// answer takes its size once encoded, or is refused. Writes are never refused once done: their
// answers are small and not counted.
package handlers

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"usersd/handlers/apierror"
)

const (
	// DefaultAnswerMemory is the budget when Config.AnswerMemory is 0: room for a hundred of the
	// largest pages the API gives (a page of 100 posts of 10,000 characters), or for a hundred
	// lists at work at once, while the process stays within a few hundred MiB whatever its clients
	// do.
	DefaultAnswerMemory = 128 << 20
	// smallAnswerBytes is the size below which an answer is not counted: the server's own buffer of
	// each stream (4 KiB on HTTP/1.1 and HTTP/2) holds that much of any answer anyway, and a
	// health check or a single user must get through while large answers fill the budget.
	smallAnswerBytes = 4 << 10
	// listTicketBytes is what a list holds of the budget while it works, before its answer's size
	// is known: about the largest page of posts, so that the lists at work and their rows, which
	// are in memory too, stay within the budget.
	listTicketBytes = 1 << 20
	// listTicketWait is how long a list waits for a ticket before it is refused: long enough to
	// ride out a burst of lists, short enough that a refused client retries soon.
	listTicketWait = 250 * time.Millisecond
)

// answerBudget counts the bytes of answers held until their clients take them. A nil budget counts
// nothing and refuses nothing.
type answerBudget struct {
	limit    int64
	bytes    *semaphore.Weighted
	held     atomic.Int64       // what bytes has given out, for the gauge
	refusals prometheus.Counter // nil without metrics
}

func newAnswerBudget(limit int64, registerer prometheus.Registerer) (*answerBudget, error) {
	b := &answerBudget{limit: limit, bytes: semaphore.NewWeighted(limit)}
	if registerer == nil {
		return b, nil
	}
	b.refusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "usersd_answer_budget_refusals_total",
		Help: "Reads refused with 503 / unavailable because the answers held for clients filled the answer memory budget.",
	})
	for _, c := range []prometheus.Collector{
		b.refusals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "usersd_answer_bytes_held",
			Help: "Bytes of the answer memory budget held by answers not yet taken by their clients, and by lists at work.",
		}, func() float64 { return float64(b.held.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "usersd_answer_budget_bytes",
			Help: "The answer memory budget (-answer-memory).",
		}, func() float64 { return float64(b.limit) }),
	} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// take gives n bytes of the budget if they are free now.
func (b *answerBudget) take(n int64) bool {
	if !b.bytes.TryAcquire(n) {
		return false
	}
	b.held.Add(n)
	return true
}

// wait gives n bytes of the budget when they are free, waiting at most listTicketWait.
func (b *answerBudget) wait(ctx context.Context, n int64) bool {
	if b.take(n) {
		return true // without a timer: most lists find room at once
	}
	if n > b.limit {
		return false // never free: Acquire would wait for the whole of ctx
	}
	ctx, cancel := context.WithTimeout(ctx, listTicketWait)
	defer cancel()
	if b.bytes.Acquire(ctx, n) != nil {
		return false
	}
	b.held.Add(n)
	return true
}

func (b *answerBudget) give(n int64) {
	b.held.Add(-n)
	b.bytes.Release(n)
}

func (b *answerBudget) refused() error {
	if b.refusals != nil {
		b.refusals.Inc()
	}
	return apierror.New(http.StatusServiceUnavailable, connect.CodeUnavailable, apierror.ReasonAnswersOverBudget,
		"the server holds as many answers for slow clients as its memory allows; retry shortly")
}

// answerHold is what one request's answer holds of the service's answer budget, from the moment a
// list is admitted or a read's answer is counted until the request ends. It lives in the request's
// info, which withRequestContext makes with the service's budget; only the functions of this file
// read or change it after that.
type answerHold struct {
	budget *answerBudget // nil counts nothing
	held   int64
}

// admitList gives a list its ticket of the budget before it does any work, or refuses it.
func admitList(ctx context.Context) error {
	info := infoOf(ctx)
	if info == nil || info.answer.budget == nil {
		return nil
	}
	hold := &info.answer
	if !hold.budget.wait(ctx, listTicketBytes) {
		return hold.budget.refused()
	}
	hold.held += listTicketBytes
	return nil
}

// holdAnswer counts the encoded answer of a read, n bytes, against the budget until the request
// ends (withRequestContext gives it back): a list's ticket becomes its answer's size, and an
// answer that does not fit is refused. The answers of writes are not counted: the write is done,
// and its client must learn so.
func holdAnswer(ctx context.Context, n int, read bool) error {
	info := infoOf(ctx)
	if info == nil || info.answer.budget == nil || !read {
		return nil
	}
	hold := &info.answer
	size := int64(n)
	if size < smallAnswerBytes {
		size = 0
	}
	switch held := hold.held; {
	case size <= held:
		hold.budget.give(held - size)
	case !hold.budget.take(size - held):
		return hold.budget.refused() // what it held is given back as the request ends
	}
	hold.held = size
	return nil
}

// release gives back what the request's answer held; withRequestContext calls it once the
// handler has returned, when the answer has been written or its client has gone.
func (h *answerHold) release() {
	if h.held > 0 {
		h.budget.give(h.held)
		h.held = 0
	}
}

// spendAnswerBudget is the answer budget of the unary RPCs of the users service: a list (a method
// whose answer has a next_page_token, as AIP-158 pages) is refused before it runs while the budget
// is nearly spent, and the answer of a read, counted at its protobuf size (the JSON form is larger
// by a small factor), is refused when it does not fit. Streams are bounded by their own limits
// (watchers, send buffers, the watch write timeout).
type spendAnswerBudget struct{}

func (spendAnswerBudget) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		read := req.Spec().IdempotencyLevel == connect.IdempotencyNoSideEffects
		if isList(req.Spec()) {
			if err := admitList(ctx); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, req)
		if err != nil {
			return res, err // a list's ticket is given back as the request ends
		}
		if m, ok := res.Any().(proto.Message); ok {
			if err := holdAnswer(ctx, proto.Size(m), read); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
}

// isList reports whether a method answers with a page of a list.
func isList(spec connect.Spec) bool {
	method, ok := spec.Schema.(protoreflect.MethodDescriptor)
	return ok && method.Output().Fields().ByName("next_page_token") != nil
}

func (spendAnswerBudget) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (spendAnswerBudget) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
