package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterFigures are what an instance of a cluster reports about its part
// in it.
type ClusterFigures struct {
	// Leases is how many pipelines' leases the instance holds.
	Leases int
	// Live is how many instances heartbeat, this one included, as of
	// the last round.
	Live int
	// RenewalFailures counts the rounds whose renewal failed.
	RenewalFailures uint64
	// RenewalAge is how long ago the last successful renewal was sent
	// (since the instance joined, before its first).
	RenewalAge time.Duration
	// TTL is the instance's cluster.lease-ttl: the renewal age is read
	// against it.
	TTL time.Duration
	// TakenOver and HandedOver count pipelines this instance took up
	// and gave away (rebalancing, failover, losing contact).
	TakenOver, HandedOver uint64
	// Lost counts leases another instance took over while this one
	// still thought it held them.
	Lost uint64
	// ViewsDiffer is true while the live instances have not known the
	// same pipelines for a while (their pipeline files differ).
	ViewsDiffer bool
}

// WatchCluster exports the instance's cluster figures, read on each
// scrape; every series carries the instance id, so that the scrapes of
// several instances can be told apart and summed.
func (m *Metrics) WatchCluster(instance string, figures func() ClusterFigures) {
	labels := prometheus.Labels{"instance_id": instance}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, labels) }
	m.registry.MustRegister(&clusterCollector{figures: figures,
		leases:   desc("conduit_cluster_leases", "Pipelines whose lease this instance holds (the pipelines it runs)."),
		live:     desc("conduit_cluster_live_instances", "Instances that heartbeat, this one included."),
		failures: desc("conduit_cluster_lease_renewal_failures_total", "Rounds in which this instance could not renew its leases."),
		age: desc("conduit_cluster_lease_renewal_age_seconds", "Seconds since this instance last renewed its leases (since it joined, before its first renewal); it renews every fifth of cluster.lease-ttl, "+
			"stops its pipelines at half of it and writes nothing from three quarters."),
		ttl:    desc("conduit_cluster_lease_ttl_seconds", "This instance's cluster.lease-ttl, against which conduit_cluster_lease_renewal_age_seconds is read."),
		taken:  desc("conduit_cluster_pipelines_taken_over_total", "Pipelines this instance took up (new, rebalanced or failed over)."),
		handed: desc("conduit_cluster_pipelines_handed_over_total", "Pipelines this instance gave away (rebalanced, or stopped because it could not renew its leases)."),
		lost:   desc("conduit_cluster_leases_lost_total", "Leases another instance took over while this one still held them (it was paused or cut off)."),
		differ: desc("conduit_cluster_views_differ", "1 while the live instances have not known the same pipelines for two lease TTLs (give every instance the same pipeline files); each pipeline runs on one of the instances that know it."),
	})
}

type clusterCollector struct {
	figures                                     func() ClusterFigures
	leases, live, failures, taken, handed, lost *prometheus.Desc
	differ, age, ttl                            *prometheus.Desc
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leases, c.live, c.failures, c.taken, c.handed, c.lost, c.differ, c.age, c.ttl} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.figures()
	ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(f.Leases))
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(f.Live))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(f.RenewalFailures))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, f.RenewalAge.Seconds())
	ch <- prometheus.MustNewConstMetric(c.ttl, prometheus.GaugeValue, f.TTL.Seconds())
	ch <- prometheus.MustNewConstMetric(c.taken, prometheus.CounterValue, float64(f.TakenOver))
	ch <- prometheus.MustNewConstMetric(c.handed, prometheus.CounterValue, float64(f.HandedOver))
	ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, float64(f.Lost))
	differ := 0.0
	if f.ViewsDiffer {
		differ = 1
	}
	ch <- prometheus.MustNewConstMetric(c.differ, prometheus.GaugeValue, differ)
}
