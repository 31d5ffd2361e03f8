package conformancetest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"usersd/auth"
	"usersd/handlers"
	conformancev1 "usersd/internal/conformancetest/gen/connectrpc/conformance/v1"
	"usersd/internal/conformancetest/gen/connectrpc/conformance/v1/conformancev1connect"
	"usersd/store/sqlstore"
)

// Serve is the server under test as the suite's runner starts it: it reads a ServerCompatRequest
// from in, starts usersd's handler with the ConformanceService mounted on a loopback port, writes a
// ServerCompatResponse with that port to out, and serves until ctx ends (the runner's SIGTERM).
// Both messages are framed as the runner frames them: a 4-byte big-endian length, then the
// message in binary proto.
func Serve(ctx context.Context, in io.Reader, out io.Writer, logs io.Writer) error {
	var req conformancev1.ServerCompatRequest
	if err := readFramed(in, &req); err != nil {
		return fmt.Errorf("reading the ServerCompatRequest: %w", err)
	}
	if req.GetUseTls() {
		return errors.New("the server under test speaks no TLS: the suite's configuration says supports_tls: false")
	}
	dir, err := os.MkdirTemp("", "usersd-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := sqlstore.Open(ctx, filepath.Join(dir, "users.db"))
	if err != nil {
		return fmt.Errorf("opening the store: %w", err)
	}
	defer st.Close()
	keys := &auth.APIKeys{}
	if err := keys.Add(auth.NewAPIKey(rand.Text())); err != nil { // no call of the suite needs it
		return err
	}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := handlers.New(handlers.Config{
		Store: st, Keys: keys, Logger: logger,
		MaxBodyBytes: int64(req.GetMessageReceiveLimit()), // 0: usersd's default
		ExtraServices: []handlers.ExtraService{{
			Descriptor: conformancev1.File_connectrpc_conformance_v1_service_proto.Services().ByName("ConformanceService"),
			Public:     "the conformance suite's service changes nothing of usersd",
			Mount: func(options ...connect.HandlerOption) (string, http.Handler) {
				return conformancev1connect.NewConformanceServiceHandler(service{}, options...)
			},
		}},
	})
	if err != nil {
		return fmt.Errorf("building the handler: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: svc, ConnContext: handlers.ConnContext, Protocols: &protocols,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().(*net.TCPAddr)
	if err := writeFramed(out, &conformancev1.ServerCompatResponse{Host: addr.IP.String(), Port: uint32(addr.Port)}); err != nil {
		srv.Close()
		return fmt.Errorf("writing the ServerCompatResponse: %w", err)
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	svc.Drain()
	svc.EndWatches()
	return srv.Close()
}

func readFramed(r io.Reader, m proto.Message) error {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

func writeFramed(w io.Writer, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	framed := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	_, err = w.Write(append(framed, b...))
	return err
}
