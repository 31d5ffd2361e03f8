package handlers

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/anypb"

	"usersd/internal/apitest"
	conformancev1 "usersd/internal/conformancetest/gen/connectrpc/conformance/v1"
	"usersd/internal/conformancetest/gen/connectrpc/conformance/v1/conformancev1connect"
)

// echoService is a connect service that the tests mount beside usersd's own (Config.ExtraServices):
// Unary answers the error its request's definition asks for, or the size of what it received;
// ClientStream counts the messages it received.
type echoService struct {
	conformancev1connect.UnimplementedConformanceServiceHandler
}

func (echoService) Unary(_ context.Context, req *connect.Request[conformancev1.UnaryRequest]) (*connect.Response[conformancev1.UnaryResponse], error) {
	if e := req.Msg.GetResponseDefinition().GetError(); e != nil {
		ce := connect.NewError(connect.Code(e.GetCode()), errors.New(e.GetMessage()))
		for _, d := range e.GetDetails() {
			detail, err := connect.NewErrorDetail(d)
			if err != nil {
				return nil, err
			}
			ce.AddDetail(detail)
		}
		ce.Meta().Set("X-Echo", "from the handler")
		return nil, ce
	}
	return connect.NewResponse(&conformancev1.UnaryResponse{Payload: &conformancev1.ConformancePayload{Data: make([]byte, len(req.Msg.GetRequestData()))}}), nil
}

func (echoService) ClientStream(_ context.Context, stream *connect.ClientStream[conformancev1.ClientStreamRequest]) (*connect.Response[conformancev1.ClientStreamResponse], error) {
	var n int
	for stream.Receive() {
		n++
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&conformancev1.ClientStreamResponse{Payload: &conformancev1.ConformancePayload{Data: make([]byte, n)}}), nil
}

// withEchoService mounts echoService, callable without a key.
func withEchoService(cfg Config) Config {
	cfg.ExtraServices = append(cfg.ExtraServices, ExtraService{
		Descriptor: conformancev1.File_connectrpc_conformance_v1_service_proto.Services().ByName("ConformanceService"),
		Public:     "a test's service that changes nothing",
		Mount: func(options ...connect.HandlerOption) (string, http.Handler) {
			return conformancev1connect.NewConformanceServiceHandler(echoService{}, options...)
		},
	})
	return cfg
}

func echoClient(s *testServer, p apitest.RPCProtocol, extra ...connect.ClientOption) conformancev1connect.ConformanceServiceClient {
	return conformancev1connect.NewConformanceServiceClient(apitest.H2CClient, s.BaseURL, append(p.Opts[:len(p.Opts):len(p.Opts)], extra...)...)
}

func mustAny(m *conformancev1.Header) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}
