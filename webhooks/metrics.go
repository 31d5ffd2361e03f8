package webhooks

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's collectors: deliveries by result, and each subscription's lag.
type Metrics struct {
	attempts *prometheus.HistogramVec
	lagging  *prometheus.GaugeVec
}

// NewMetrics registers the engine's collectors with registerer.
func NewMetrics(registerer prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "usersd_webhook_attempts_seconds",
			Help:    "Webhook delivery attempts by result (delivered, failed, refused: an address the policy refuses, gone: a 410), and how long each took.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"result"}),
		lagging: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersd_webhook_lag_seconds",
			Help: "How long ago the oldest change a subscription delivered by this process has not been sent yet was made; 0 when it has been sent everything.",
		}, []string{"webhook"}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.lagging} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// metrics is what the engine reports to: nil-safe, so that an engine without collectors reports
// nothing.
type metrics struct{ m *Metrics }

func (m *Metrics) orNone() *metrics { return &metrics{m} }

func (m *metrics) attempted(result string, took time.Duration) {
	if m.m != nil {
		m.m.attempts.WithLabelValues(result).Observe(took.Seconds())
	}
}

func (m *metrics) lag(id int32, seconds float64) {
	if m.m != nil {
		m.m.lagging.WithLabelValues(strconv.Itoa(int(id))).Set(seconds)
	}
}

func (m *metrics) forget(id int32) {
	if m.m != nil {
		m.m.lagging.DeleteLabelValues(strconv.Itoa(int(id)))
	}
}
