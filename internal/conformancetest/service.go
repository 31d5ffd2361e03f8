// Package conformancetest is the server under test of the Connect conformance suite: its
// ConformanceService, mounted in usersd's own handler (handlers.Config.ExtraServices) so that the
// suite judges what clients of usersd get, and the process the suite's runner starts. Nothing of it
// is in the binary; conformance_test.go runs the suite against it.
package conformancetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	conformancev1 "usersd/internal/conformancetest/gen/connectrpc/conformance/v1"
	"usersd/internal/conformancetest/gen/connectrpc/conformance/v1/conformancev1connect"
)

// service answers each call as its request's response definition asks: headers, trailers, data or
// an error, after a delay, echoing what it received (docs/testing_servers.md of the suite's module).
// Unimplemented is left to the generated handler, which answers unimplemented.
type service struct {
	conformancev1connect.UnimplementedConformanceServiceHandler
}

var _ conformancev1connect.ConformanceServiceHandler = service{}

func (service) Unary(ctx context.Context, req *connect.Request[conformancev1.UnaryRequest]) (*connect.Response[conformancev1.UnaryResponse], error) {
	payload, header, trailer, err := answerUnary(ctx, req.Msg.GetResponseDefinition(), req.Header(), req.Peer().Query, req.Msg)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&conformancev1.UnaryResponse{Payload: payload})
	copyHeader(res.Header(), header)
	copyHeader(res.Trailer(), trailer)
	return res, nil
}

func (service) IdempotentUnary(ctx context.Context, req *connect.Request[conformancev1.IdempotentUnaryRequest]) (*connect.Response[conformancev1.IdempotentUnaryResponse], error) {
	payload, header, trailer, err := answerUnary(ctx, req.Msg.GetResponseDefinition(), req.Header(), req.Peer().Query, req.Msg)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&conformancev1.IdempotentUnaryResponse{Payload: payload})
	copyHeader(res.Header(), header)
	copyHeader(res.Trailer(), trailer)
	return res, nil
}

func (service) ClientStream(ctx context.Context, stream *connect.ClientStream[conformancev1.ClientStreamRequest]) (*connect.Response[conformancev1.ClientStreamResponse], error) {
	var def *conformancev1.UnaryResponseDefinition
	var received []proto.Message
	for stream.Receive() {
		if len(received) == 0 { // only the first message's definition counts
			def = stream.Msg().GetResponseDefinition()
		}
		received = append(received, stream.Msg())
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	payload, header, trailer, err := answerUnary(ctx, def, stream.RequestHeader(), stream.Peer().Query, received...)
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse(&conformancev1.ClientStreamResponse{Payload: payload})
	copyHeader(res.Header(), header)
	copyHeader(res.Trailer(), trailer)
	return res, nil
}

func (service) ServerStream(ctx context.Context, req *connect.Request[conformancev1.ServerStreamRequest], stream *connect.ServerStream[conformancev1.ServerStreamResponse]) error {
	def := req.Msg.GetResponseDefinition()
	if def == nil {
		return nil
	}
	addHeaders(stream.ResponseHeader(), def.GetResponseHeaders())
	addHeaders(stream.ResponseTrailer(), def.GetResponseTrailers())
	info := requestInfo(req.Header(), req.Peer().Query, req.Msg)
	if len(def.GetResponseData()) > 0 {
		// The headers go at once, so that the client reads them before the first delay.
		if err := stream.Send(nil); err != nil {
			return err
		}
	}
	for i, data := range def.GetResponseData() {
		payload := &conformancev1.ConformancePayload{Data: data}
		if i == 0 {
			payload.RequestInfo = info
		}
		if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
			return err
		}
		if err := stream.Send(&conformancev1.ServerStreamResponse{Payload: payload}); err != nil {
			return err
		}
	}
	if def.GetError() == nil {
		return nil
	}
	if len(def.GetResponseData()) > 0 {
		info = nil // the first message already echoed the request
	}
	return errorOf(def.GetError(), info)
}

func (service) BidiStream(ctx context.Context, stream *connect.BidiStream[conformancev1.BidiStreamRequest, conformancev1.BidiStreamResponse]) error {
	var (
		def        *conformancev1.StreamResponseDefinition
		fullDuplex bool
		pending    []proto.Message // received since the last answer
		sent       int
	)
	for {
		msg, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if sent == 0 && len(pending) == 0 { // the first message says how the stream goes
			def, fullDuplex = msg.GetResponseDefinition(), msg.GetFullDuplex()
			addHeaders(stream.ResponseHeader(), def.GetResponseHeaders())
			addHeaders(stream.ResponseTrailer(), def.GetResponseTrailers())
			if fullDuplex && len(def.GetResponseData()) > 0 {
				if err := stream.Send(nil); err != nil {
					return err
				}
			}
		}
		pending = append(pending, msg)
		if !fullDuplex {
			continue
		}
		if sent >= len(def.GetResponseData()) {
			break // nothing more to answer: the error, if any, ends the stream
		}
		if err := sendBidi(ctx, stream, def, sent, stream.RequestHeader(), pending); err != nil {
			return err
		}
		sent, pending = sent+1, nil
	}
	if !fullDuplex && len(def.GetResponseData()) > 0 {
		if err := stream.Send(nil); err != nil {
			return err
		}
	}
	for ; sent < len(def.GetResponseData()); sent++ {
		if err := sendBidi(ctx, stream, def, sent, stream.RequestHeader(), pending); err != nil {
			return err
		}
		pending = nil
	}
	if def.GetError() == nil {
		return nil
	}
	var info *conformancev1.ConformancePayload_RequestInfo
	if sent == 0 {
		info = requestInfo(stream.RequestHeader(), nil, pending...)
	}
	return errorOf(def.GetError(), info)
}

// sendBidi sends the i-th answer of a bidi stream after the definition's delay; the first carries
// the whole request info, the others only the requests received since the last answer.
func sendBidi(ctx context.Context, stream *connect.BidiStream[conformancev1.BidiStreamRequest, conformancev1.BidiStreamResponse],
	def *conformancev1.StreamResponseDefinition, i int, header http.Header, received []proto.Message) error {
	info := requestInfo(header, nil, received...)
	if i > 0 {
		info = &conformancev1.ConformancePayload_RequestInfo{Requests: info.GetRequests()}
	}
	if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
		return err
	}
	return stream.Send(&conformancev1.BidiStreamResponse{Payload: &conformancev1.ConformancePayload{Data: def.GetResponseData()[i], RequestInfo: info}})
}

// answerUnary is the answer of a call with one response: its payload and the headers and trailers
// to send with it, or the error the definition asks for, which carries them itself (connect-go
// sends an error's metadata as headers or trailers, as the protocol allows).
func answerUnary(ctx context.Context, def *conformancev1.UnaryResponseDefinition, header http.Header, query map[string][]string,
	received ...proto.Message) (payload *conformancev1.ConformancePayload, resHeader, resTrailer http.Header, err error) {
	info := requestInfo(header, query, received...)
	if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
		return nil, nil, nil, err
	}
	if def.GetError() != nil {
		ce := errorOf(def.GetError(), info)
		addHeaders(ce.Meta(), def.GetResponseHeaders())
		addHeaders(ce.Meta(), def.GetResponseTrailers())
		return nil, nil, nil, ce
	}
	resHeader, resTrailer = http.Header{}, http.Header{}
	addHeaders(resHeader, def.GetResponseHeaders())
	addHeaders(resTrailer, def.GetResponseTrailers())
	return &conformancev1.ConformancePayload{Data: def.GetResponseData(), RequestInfo: info}, resHeader, resTrailer, nil
}

// requestInfo echoes what the server received: the headers, the client's timeout, the query of a
// Connect GET and the messages.
func requestInfo(header http.Header, query map[string][]string, received ...proto.Message) *conformancev1.ConformancePayload_RequestInfo {
	info := &conformancev1.ConformancePayload_RequestInfo{RequestHeaders: headersOf(header), TimeoutMs: timeoutOf(header)}
	if len(query) > 0 {
		info.ConnectGetInfo = &conformancev1.ConformancePayload_ConnectGetInfo{QueryParams: headersOf(query)}
	}
	for _, m := range received {
		a, err := anypb.New(m)
		if err != nil {
			panic(err) // a generated message always packs
		}
		info.Requests = append(info.Requests, a)
	}
	return info
}

// timeoutOf reads the client's timeout from its request headers, as it sent it: the handler's own
// deadline would also hold usersd's request timeout, which the client did not ask for.
func timeoutOf(header http.Header) *int64 {
	if ms, err := strconv.ParseInt(header.Get("Connect-Timeout-Ms"), 10, 64); err == nil {
		return &ms
	}
	grpc := header.Get("Grpc-Timeout")
	if len(grpc) < 2 {
		return nil
	}
	n, err := strconv.ParseInt(grpc[:len(grpc)-1], 10, 64)
	if err != nil {
		return nil
	}
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[grpc[len(grpc)-1]]
	if unit == 0 {
		return nil
	}
	ms := (time.Duration(n) * unit).Milliseconds()
	return &ms
}

// errorOf is the connect error a definition asks for, with the request info as its last detail
// when info is not nil.
func errorOf(e *conformancev1.Error, info *conformancev1.ConformancePayload_RequestInfo) *connect.Error {
	var cause error
	if e.GetMessage() != "" {
		cause = errors.New(e.GetMessage())
	}
	ce := connect.NewError(connect.Code(e.GetCode()), cause)
	details := e.GetDetails()
	if info != nil {
		a, err := anypb.New(info)
		if err != nil {
			panic(err) // a generated message always packs
		}
		details = append(details, a)
	}
	for _, d := range details {
		detail, err := connect.NewErrorDetail(d)
		if err != nil {
			return connect.NewError(connect.CodeInternal, err)
		}
		ce.AddDetail(detail)
	}
	return ce
}

func headersOf(h map[string][]string) []*conformancev1.Header {
	out := make([]*conformancev1.Header, 0, len(h))
	for name, values := range h {
		out = append(out, &conformancev1.Header{Name: strings.ToLower(name), Value: values})
	}
	return out
}

func addHeaders(dst http.Header, headers []*conformancev1.Header) {
	for _, h := range headers {
		for _, v := range h.GetValue() {
			dst.Add(h.GetName(), v)
		}
	}
}

func copyHeader(dst, src http.Header) {
	for name, values := range src {
		dst[name] = append(dst[name], values...)
	}
}

// sleep waits ms milliseconds, or until the client is gone. The deadline does not cut it short:
// the suite's timeout cases delay the answer past the client's timeout and expect the client's
// own deadline to end the call, and a server that answered deadline_exceeded at the same instant
// would race that deadline in the suite's client, which then reads a cut error body.
func sleep(ctx context.Context, ms uint32) error {
	if ms == 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			<-t.C
			return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
		}
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
}
