// The metrics of read standbys: where reads went and why, and each standby's state, read from the
// store at each scrape.
package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"usersd/store/sqlstore"
)

var (
	readsDesc = prometheus.NewDesc("usersd_db_reads_total",
		"Reads of the store by the database that served them (target primary or standby) and why (reason).",
		[]string{"target", "reason"}, nil)
	standbyUpDesc = prometheus.NewDesc("usersd_db_standby_up",
		"1 while a read standby answers as a standby, 0 while it is passed over.", []string{"standby"}, nil)
	standbyLagDesc = prometheus.NewDesc("usersd_db_standby_lag_seconds",
		"How far behind the primary a read standby's data may be: the time since the newest moment whose writes it is known to hold.",
		[]string{"standby"}, nil)
)

// readRoutingCollector collects the read routing of a store with read standbys.
type readRoutingCollector struct{ store *sqlstore.Store }

func (c readRoutingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readsDesc
	ch <- standbyUpDesc
	ch <- standbyLagDesc
}

func (c readRoutingCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.store.ReadRoutes() {
		target := "primary"
		if r.Standby {
			target = "standby"
		}
		ch <- prometheus.MustNewConstMetric(readsDesc, prometheus.CounterValue, float64(r.Reads), target, r.Reason)
	}
	for _, sb := range c.store.Standbys() {
		up := 0.0
		if sb.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(standbyUpDesc, prometheus.GaugeValue, up, sb.Name)
		ch <- prometheus.MustNewConstMetric(standbyLagDesc, prometheus.GaugeValue, sb.Lag.Seconds(), sb.Name)
	}
}
