package redlockotel_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlockotel"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures to killed nodes are expected here
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// rig is a Client on real redis-servers whose Observer is a redlockotel.Observer
// recording into a ManualReader and a SpanRecorder; it also keeps the raw events.
type rig struct {
	t       *testing.T
	servers []*redistest.Server
	admin   []*redis.Client
	client  *redlock.Client
	reader  *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
	tp      *sdktrace.TracerProvider
	events  *eventLog
}

// newRig starts n servers and a Client observed by an Observer made with opts (the
// providers are added here).
func newRig(t *testing.T, n int, ro redlock.Options, opts ...redlockotel.Option) *rig {
	t.Helper()
	r := &rig{t: t, servers: redistest.StartN(t, n, redistest.Options{}),
		reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), events: &eventLog{}}
	for _, s := range r.servers {
		r.admin = append(r.admin, s.Client())
	}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := redlockotel.New(append([]redlockotel.Option{
		redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(r.tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ro.Observer = tee{obs, r.events}
	r.client, err = redlock.New(clients(t, r.servers), ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.client.Close() })
	return r
}

// clients returns a client for each server that retries neither a failed command nor a
// failed dial, so that a refused connection is reported as such within the node timeout.
func clients(t *testing.T, servers []*redistest.Server) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}

// tee hands each event to both observers.
type tee struct{ a, b redlock.Observer }

func (t tee) Observe(ctx context.Context, e redlock.Event) {
	t.a.Observe(ctx, e)
	t.b.Observe(ctx, e)
}

// eventLog keeps the events an Observer got.
type eventLog struct {
	mu     sync.Mutex
	events []redlock.Event
}

func (l *eventLog) Observe(_ context.Context, e redlock.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// take returns the events so far and forgets them.
func (l *eventLog) take() []redlock.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

// metrics collects the reader's current data.
func (r *rig) metrics() metricdata.ResourceMetrics {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatal(err)
	}
	return rm
}

// find returns the metric called name; its Data is nil when nothing was recorded.
func find(rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	return metricdata.Metrics{Name: name}
}

// has reports whether set has every attribute of want (value compared as emitted).
func has(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.Emit() != v {
			return false
		}
	}
	return true
}

// sum adds the int64 sum (counter or up/down counter) points of name that match want.
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, want map[string]string) int64 {
	t.Helper()
	m := find(rm, name)
	if m.Data == nil {
		return 0
	}
	data, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, not an int64 sum", name, m.Data)
	}
	var n int64
	for _, p := range data.DataPoints {
		if has(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// count returns how many values the histogram points of name that match want hold,
// and their sum.
func count(t *testing.T, rm metricdata.ResourceMetrics, name string, want map[string]string) (uint64, float64) {
	t.Helper()
	m := find(rm, name)
	var n uint64
	var total float64
	switch data := m.Data.(type) {
	case nil:
	case metricdata.Histogram[float64]:
		for _, p := range data.DataPoints {
			if has(p.Attributes, want) {
				n, total = n+p.Count, total+p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range data.DataPoints {
			if has(p.Attributes, want) {
				n, total = n+p.Count, total+float64(p.Sum)
			}
		}
	default:
		t.Fatalf("%s is a %T, not a histogram", name, m.Data)
	}
	return n, total
}

// attrSets returns every attribute set of name's points.
func attrSets(t *testing.T, rm metricdata.ResourceMetrics, name string) []attribute.Set {
	t.Helper()
	var sets []attribute.Set
	switch data := find(rm, name).Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range data.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range data.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, p := range data.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}

// ended returns the recorded spans called name, in the order they ended.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the span attribute k as emitted, and whether it is there.
func attr(kvs []attribute.KeyValue, k attribute.Key) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value.Emit(), true
		}
	}
	return "", false
}
