package apitest

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics reads /metrics from s, an admin listener, as Prometheus' text format.
func (s Server) Metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	res := s.Do(t, HTTP1Client, Request{Method: "GET", Path: "/metrics"})
	if res.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(res.Body)))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus' text format: %v", err)
	}
	return families
}

// Metric reads /metrics from s, an admin listener, and returns the value of the series of family
// with exactly labels, or 0 if there is none (see Sample).
func (s Server) Metric(t *testing.T, family string, labels map[string]string) float64 {
	t.Helper()
	v, _ := Sample(s.Metrics(t), family, labels)
	return v
}

// Sample returns the value of the series of family with exactly labels (a counter's or gauge's
// value, a histogram's count), and whether there is one.
func Sample(families map[string]*dto.MetricFamily, family string, labels map[string]string) (float64, bool) {
	f, ok := families[family]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		matches := true
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				matches = false
			}
		}
		if !matches {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}
