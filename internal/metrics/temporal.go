package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// The Temporal SDK emits metrics by name with free-form tag sets, and the
// same name may be emitted with different tag keys (e.g. with and without
// an "operation" tag). Prometheus wants one label set per metric family, so
// this is an unchecked collector that keeps every series and, at scrape
// time, exports each family over the union of its label names (missing
// labels are empty, which Prometheus treats as absent).

type metricKind int

const (
	kindCounter metricKind = iota
	kindGauge
	kindTimer
)

// timerBuckets in seconds; SDK latencies range from sub-millisecond task
// processing to minute-long polls.
var timerBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

type series struct {
	labels  map[string]string
	value   float64  // counter or gauge
	count   uint64   // timer
	sum     float64  // timer, seconds
	buckets []uint64 // timer, non-cumulative per bucket
}

type family struct {
	kind   metricKind
	series map[string]*series
}

type sdkCollector struct {
	mu       sync.Mutex
	families map[string]*family
}

func newSDKCollector() *sdkCollector {
	return &sdkCollector{families: map[string]*family{}}
}

// Describe sends nothing: an unchecked collector, since families appear as
// the SDK emits them.
func (c *sdkCollector) Describe(chan<- *prometheus.Desc) {}

func (c *sdkCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, f := range c.families {
		keySet := map[string]struct{}{}
		for _, s := range f.series {
			for k := range s.labels {
				keySet[k] = struct{}{}
			}
		}
		keys := slices.Sorted(maps.Keys(keySet))
		var desc *prometheus.Desc
		switch f.kind {
		case kindTimer:
			desc = prometheus.NewDesc(name, "Temporal SDK timer "+name+" (seconds).", keys, nil)
		default:
			desc = prometheus.NewDesc(name, "Temporal SDK metric "+name+".", keys, nil)
		}
		for _, s := range f.series {
			values := make([]string, len(keys))
			for i, k := range keys {
				values[i] = s.labels[k]
			}
			var m prometheus.Metric
			var err error
			switch f.kind {
			case kindCounter:
				m, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, s.value, values...)
			case kindGauge:
				m, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.value, values...)
			case kindTimer:
				cum := make(map[float64]uint64, len(timerBuckets))
				var acc uint64
				for i, ub := range timerBuckets {
					acc += s.buckets[i]
					cum[ub] = acc
				}
				m, err = prometheus.NewConstHistogram(desc, s.count, s.sum, cum, values...)
			}
			if err == nil {
				ch <- m
			}
		}
	}
}

// get returns the series for name+tags, creating it; nil when name is
// already used with another kind (the first kind wins).
func (c *sdkCollector) get(name string, kind metricKind, tags map[string]string) *series {
	name = sanitize(name)
	keys := slices.Sorted(maps.Keys(tags))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(tags[k])
		b.WriteByte(0)
	}
	id := b.String()

	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.families[name]
	if !ok {
		f = &family{kind: kind, series: map[string]*series{}}
		c.families[name] = f
	}
	if f.kind != kind {
		return nil
	}
	s, ok := f.series[id]
	if !ok {
		labels := make(map[string]string, len(tags))
		for k, v := range tags {
			labels[sanitize(k)] = v
		}
		s = &series{labels: labels}
		if kind == kindTimer {
			s.buckets = make([]uint64, len(timerBuckets))
		}
		f.series[id] = s
	}
	return s
}

func (c *sdkCollector) add(s *series, d float64) {
	c.mu.Lock()
	s.value += d
	c.mu.Unlock()
}

func (c *sdkCollector) set(s *series, v float64) {
	c.mu.Lock()
	s.value = v
	c.mu.Unlock()
}

func (c *sdkCollector) observe(s *series, d time.Duration) {
	sec := d.Seconds()
	c.mu.Lock()
	s.count++
	s.sum += sec
	for i, ub := range timerBuckets {
		if sec <= ub {
			s.buckets[i]++
			break
		}
	}
	c.mu.Unlock()
}

// sanitize maps a name onto the Prometheus alphabet [a-zA-Z0-9_:].
func sanitize(name string) string {
	var b strings.Builder
	for i, r := range name {
		ok := r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' && i > 0
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// handler implements client.MetricsHandler on top of sdkCollector.
type handler struct {
	c    *sdkCollector
	tags map[string]string
}

var _ client.MetricsHandler = (*handler)(nil)

func (h *handler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	maps.Copy(merged, h.tags)
	maps.Copy(merged, tags)
	return &handler{c: h.c, tags: merged}
}

func (h *handler) Counter(name string) client.MetricsCounter {
	s := h.c.get(name, kindCounter, h.tags)
	return counterFunc(func(d int64) {
		if s != nil && d > 0 { // counters never go down
			h.c.add(s, float64(d))
		}
	})
}

func (h *handler) Gauge(name string) client.MetricsGauge {
	s := h.c.get(name, kindGauge, h.tags)
	return gaugeFunc(func(v float64) {
		if s != nil {
			h.c.set(s, v)
		}
	})
}

func (h *handler) Timer(name string) client.MetricsTimer {
	s := h.c.get(name, kindTimer, h.tags)
	return timerFunc(func(d time.Duration) {
		if s != nil {
			h.c.observe(s, d)
		}
	})
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
