package metrics

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemrun/idemrun/runner"
)

// TopHosts is how many hosts get series of their own; the others are
// summed under the host label "other", so a runner sending to many
// hosts keeps a bounded number of series.
const TopHosts = 20

// otherHosts labels the hosts beyond TopHosts.
const otherHosts = "other"

// HostSource is what reports a runner's per-host figures: a
// *runner.Runner.
type HostSource interface {
	HostFigures() []runner.HostFigures
}

// WatchHosts adds the per-host metrics of src, read at scrape time:
// sends, 429s, 5xx, failed sends (timeouts, connection failures), sends
// refused for want of a token, sends in flight, the rate applied, whether
// back-pressure throttles the host, and the breaker state. Hosts are
// labeled as host policies name them.
func (m *Metrics) WatchHosts(src HostSource) {
	sends := prometheus.NewDesc("idemrun_host_sends_total", "Attempts and status queries sent, by target host.", []string{"host"}, nil)
	tooMany := prometheus.NewDesc("idemrun_host_429_total", "Answers 429 Too Many Requests, by target host.", []string{"host"}, nil)
	serverErrors := prometheus.NewDesc("idemrun_host_5xx_total", "Answers 5xx, by target host.", []string{"host"}, nil)
	fails := prometheus.NewDesc("idemrun_host_failures_total", "Sends that timed out or failed to connect, by target host.", []string{"host"}, nil)
	waits := prometheus.NewDesc("idemrun_host_token_waits_total", "Jobs left due because their host had no token, by target host.", []string{"host"}, nil)
	inflight := prometheus.NewDesc("idemrun_host_in_flight", "Sends in flight, by target host.", []string{"host"}, nil)
	rate := prometheus.NewDesc("idemrun_host_rate", "Send rate applied now (per second; 0: none), by target host.", []string{"host"}, nil)
	throttled := prometheus.NewDesc("idemrun_host_throttled", "Hosts held to a lower rate after they pushed back (429, 503 with Retry-After).", []string{"host"}, nil)
	breaker := prometheus.NewDesc("idemrun_host_breaker", "Hosts whose circuit breaker is in this state (1 for a host of its own).", []string{"host", "state"}, nil)
	m.reg.MustRegister(collectorFunc{descs: []*prometheus.Desc{sends, tooMany, serverErrors, fails, waits, inflight, rate, throttled, breaker}, collect: func(ch chan<- prometheus.Metric) {
		figs := src.HostFigures()
		slices.SortFunc(figs, func(a, b runner.HostFigures) int {
			return cmp.Or(cmp.Compare(b.Sends, a.Sends), cmp.Compare(a.Host, b.Host))
		})
		var rest runner.HostFigures
		restBreakers := map[string]int{}
		restThrottled := 0
		emit := func(f runner.HostFigures, breakers map[string]int, nThrottled int) {
			ch <- prometheus.MustNewConstMetric(sends, prometheus.CounterValue, float64(f.Sends), f.Host)
			ch <- prometheus.MustNewConstMetric(tooMany, prometheus.CounterValue, float64(f.TooMany), f.Host)
			ch <- prometheus.MustNewConstMetric(serverErrors, prometheus.CounterValue, float64(f.ServerErrors), f.Host)
			ch <- prometheus.MustNewConstMetric(fails, prometheus.CounterValue, float64(f.Fails), f.Host)
			ch <- prometheus.MustNewConstMetric(waits, prometheus.CounterValue, float64(f.TokenWaits), f.Host)
			ch <- prometheus.MustNewConstMetric(inflight, prometheus.GaugeValue, float64(f.InFlight), f.Host)
			ch <- prometheus.MustNewConstMetric(rate, prometheus.GaugeValue, f.Rate, f.Host)
			ch <- prometheus.MustNewConstMetric(throttled, prometheus.GaugeValue, float64(nThrottled), f.Host)
			for _, s := range []string{"closed", "open", "half_open"} {
				ch <- prometheus.MustNewConstMetric(breaker, prometheus.GaugeValue, float64(breakers[s]), f.Host, s)
			}
		}
		for i, f := range figs {
			if i < TopHosts {
				emit(f, map[string]int{f.Breaker: 1}, boolCount(f.Throttled))
				continue
			}
			rest.Host = otherHosts
			rest.Sends += f.Sends
			rest.TooMany += f.TooMany
			rest.ServerErrors += f.ServerErrors
			rest.Fails += f.Fails
			rest.TokenWaits += f.TokenWaits
			rest.InFlight += f.InFlight
			rest.Rate += f.Rate
			restBreakers[f.Breaker]++
			restThrottled += boolCount(f.Throttled)
		}
		if rest.Host != "" {
			emit(rest, restBreakers, restThrottled)
		}
	}})
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
