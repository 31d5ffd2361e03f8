// Tracing: OpenTelemetry, configured as every OpenTelemetry SDK is, by the OTEL_* variables of the
// process's environment, and off unless they name an exporter.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracesFlushTimeout bounds how long the spans still buffered at exit may take to be sent.
const tracesFlushTimeout = 5 * time.Second

// newTracing returns the tracer provider that the OTEL_* variables describe, and stop, which sends
// the spans still buffered (for up to tracesFlushTimeout) and ends it. The provider is nil if
// tracing is off (and stop does nothing): it is on when OTEL_TRACES_EXPORTER is "otlp", or is unset and an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The exporter speaks OTLP over
// HTTP (protobuf, or JSON with OTEL_EXPORTER_OTLP_PROTOCOL=http/json) and reads the other exporter
// variables itself (headers, timeout, compression, certificates); the SDK reads the sampler
// (OTEL_TRACES_SAMPLER, by default parentbased_always_on: the caller's sampling decision stands),
// the batching (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
//
// The variables are read from the process's environment, not through run's getenv, because the
// SDK reads them there itself; one source keeps the decision and the exporter from disagreeing.
func newTracing(ctx context.Context, logger *slog.Logger) (provider trace.TracerProvider, stop func() error, err error) {
	stop = func() error { return nil }
	if on, err := tracingWanted(os.Getenv); err != nil || !on {
		return nil, stop, err
	}
	// OpenTelemetry's own errors (an export that failed, say) go to the service's log, as JSON,
	// instead of the standard library's logger on stderr.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing failed", "error", err.Error())
	}))
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, stop, fmt.Errorf("OTLP exporter: %w", err)
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES can rename the service.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("usersd")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, stop, fmt.Errorf("trace resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), tracesFlushTimeout)
		defer cancel()
		if err := sdk.Shutdown(ctx); err != nil {
			return fmt.Errorf("send the last spans: %w", err)
		}
		return nil
	}
	return sdk, stop, nil
}

// tracingWanted decides from the OTEL_* variables whether to trace, and refuses what this build
// cannot do rather than trace nowhere without a word.
func tracingWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "none":
		return false, nil
	case "otlp":
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, nil
		}
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: usersd exports traces only with otlp (or none)", exporter)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf", "http/json":
		return true, nil
	}
	return false, fmt.Errorf("OTLP protocol %q: usersd sends OTLP over HTTP only (http/protobuf or http/json); "+
		"point it at the collector's HTTP port, 4318 by default", protocol)
}
