package redlockotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-go/redlock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/redlock-go/redlock/redlockotel"

// The attribute keys the Observer sets.
const (
	AttrOutcome   = attribute.Key("redlock.outcome")   // the step's redlock.Outcome, e.g. "ok", "not_acquired"
	AttrOp        = attribute.Key("redlock.op")        // the step: "acquire", "extend", "release", "keepalive"
	AttrRenewal   = attribute.Key("redlock.renewal")   // an Extend made by KeepAlive
	AttrNode      = attribute.Key("redlock.node")      // a node's name (its address or redacted URL)
	AttrErrorType = attribute.Key("error.type")        // a node error's class, or a failed step's outcome
	AttrKey       = attribute.Key("redlock.key")       // the lock's key, only with WithKeys(true)
	AttrResult    = attribute.Key("redlock.result")    // a node's answer: "yes", "no", "failed", "pending"
	AttrAttempts  = attribute.Key("redlock.attempts")  // an Acquire's attempts
	AttrTTL       = attribute.Key("redlock.ttl")       // the TTL asked for, in seconds
	AttrFence     = attribute.Key("redlock.fence")     // the granted lock's fencing token
	AttrHandoff   = attribute.Key("redlock.handoff")   // the lock was handed over (Acquire) or handed on (Release)
	AttrLost      = attribute.Key("redlock.lost")      // the step found the lock lost
	AttrRefusals  = attribute.Key("redlock.refusals")  // fencing refusals of the step
	AttrNodeAfter = attribute.Key("redlock.node.at_s") // when a node answered, in seconds since the step began
)

// Option configures New.
type Option func(*config)

type config struct {
	mp   metric.MeterProvider
	tp   trace.TracerProvider
	keys bool
}

// WithMeterProvider sets where the metrics go. Without it, or with nil, New uses the
// global provider (otel.GetMeterProvider) as it is when New is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets where the spans go. Without it, or with nil, New uses the
// global provider (otel.GetTracerProvider) as it is when New is called. A no-op
// provider (go.opentelemetry.io/otel/trace/noop) turns spans off at no cost: the
// Observer then starts none, where the global provider, even unset, costs a few
// allocations per step for spans that nobody records.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithKeys makes the lock's key an attribute (redlock.key) of every metric and span.
// Off by default: each key would be a time series of its own.
func WithKeys(on bool) Option {
	return func(c *config) { c.keys = on }
}

// Observer is a redlock.Observer that records metrics and spans. It is safe for
// concurrent use; one Observer may serve many Clients.
type Observer struct {
	tracer trace.Tracer
	keys   bool
	m      instruments
	// Option lists made once, for the attribute sets that do not involve keys: building
	// them per event, even passing one option to a variadic call, costs an allocation.
	// none, byOutcome[o], extendBy[renewal][o] and lostBy[op].
	none      []metric.AddOption
	byOutcome [numOutcomes][]metric.RecordOption
	extendBy  [2][numOutcomes][]metric.RecordOption
	lostBy    [numOps][]metric.AddOption
}

// numOps bounds the redlock.Op values this package knows by name.
const numOps = int(redlock.OpKeepAlive) + 1

// numOutcomes bounds the redlock.Outcome values this package knows by name.
const numOutcomes = int(redlock.OutcomeUnavailable) + 1

var _ redlock.Observer = (*Observer)(nil)

// New returns an Observer that records on the providers the options name (by default
// the global ones). It fails only if an instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	o := &Observer{keys: cfg.keys}
	if _, off := cfg.tp.(tracenoop.TracerProvider); !off {
		o.tracer = cfg.tp.Tracer(ScopeName) // else nil: no span is started at all
	}
	if err := o.m.init(cfg.mp.Meter(ScopeName)); err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	o.none = []metric.AddOption{metric.WithAttributeSet(*attribute.EmptySet())}
	for i := range numOps {
		o.lostBy[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrOp.String(redlock.Op(i).String())))}
	}
	for i := range numOutcomes {
		out := AttrOutcome.String(redlock.Outcome(i).String())
		o.byOutcome[i] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(out))}
		for r, renewal := range []bool{false, true} {
			o.extendBy[r][i] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(out, AttrRenewal.Bool(renewal)))}
		}
	}
	o.startCounters()
	return o, nil
}

// startCounters records a zero in the counters that alerts watch, for every attribute
// set known in advance (not the keys of WithKeys): Prometheus's increase() and rate()
// count nothing for a series' first sample, so a counter that first appeared at 1 (the
// first lost lock of a process) would never show as an increase, and the alert on it
// would not fire.
func (o *Observer) startCounters() {
	if o.keys {
		return
	}
	ctx := context.Background()
	for i := int(redlock.OpAcquire); i < numOps; i++ {
		o.m.lost.Add(ctx, 0, o.lostBy[i]...)
	}
	o.m.handoffs.Add(ctx, 0, o.none...)
	o.m.fenceRefusals.Add(ctx, 0, o.none...)
}

// Observe records e: the metrics first, then its span.
func (o *Observer) Observe(ctx context.Context, e redlock.Event) {
	o.record(ctx, &e)
	o.span(ctx, &e)
}

// record updates the metrics for e.
func (o *Observer) record(ctx context.Context, e *redlock.Event) {
	var key []attribute.KeyValue
	plain := o.none // the options of the instruments that have no attribute but the key
	if o.keys {
		key = []attribute.KeyValue{AttrKey.String(e.Key)}
		plain = []metric.AddOption{metric.WithAttributes(key...)}
	}
	m := &o.m
	switch e.Op {
	case redlock.OpAcquire:
		by := o.outcomeOpt(e, key)
		m.acquireDuration.Record(ctx, e.Duration.Seconds(), by...)
		if e.Attempts > 0 {
			m.acquireAttempts.Record(ctx, int64(e.Attempts), by...)
		}
		if e.Outcome == redlock.OutcomeOK {
			m.held.Add(ctx, 1, plain...)
		}
	case redlock.OpExtend:
		m.extendDuration.Record(ctx, e.Duration.Seconds(), o.extendOpt(e, key)...)
	case redlock.OpRelease:
		if e.Handoff && e.Outcome == redlock.OutcomeOK {
			m.handoffs.Add(ctx, 1, plain...)
		}
	}
	if e.Ended {
		m.held.Add(ctx, -1, plain...)
		if e.Lost {
			m.lost.Add(ctx, 1, o.lostOpt(e, key)...)
		}
	}
	if e.FenceRefusals > 0 {
		m.fenceRefusals.Add(ctx, int64(e.FenceRefusals), plain...)
	}
	for _, n := range e.Nodes {
		if n.Result != redlock.ResultFailed {
			continue
		}
		attrs := append([]attribute.KeyValue{AttrNode.String(n.Node), AttrErrorType.String(n.Class),
			AttrOp.String(e.Op.String())}, key...)
		m.nodeErrors.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
}

// outcomeOpt returns the attributes of an Acquire's measurements.
func (o *Observer) outcomeOpt(e *redlock.Event, key []attribute.KeyValue) []metric.RecordOption {
	if key == nil && int(e.Outcome) < numOutcomes {
		return o.byOutcome[e.Outcome]
	}
	return []metric.RecordOption{metric.WithAttributes(append(key, AttrOutcome.String(e.Outcome.String()))...)}
}

// lostOpt returns the attributes of a lost lock's count.
func (o *Observer) lostOpt(e *redlock.Event, key []attribute.KeyValue) []metric.AddOption {
	if key == nil && int(e.Op) < numOps {
		return o.lostBy[e.Op]
	}
	return []metric.AddOption{metric.WithAttributes(append(key, AttrOp.String(e.Op.String()))...)}
}

// extendOpt returns the attributes of an Extend's measurement.
func (o *Observer) extendOpt(e *redlock.Event, key []attribute.KeyValue) []metric.RecordOption {
	if key == nil && int(e.Outcome) < numOutcomes {
		r := 0
		if e.Renewal {
			r = 1
		}
		return o.extendBy[r][e.Outcome]
	}
	return []metric.RecordOption{metric.WithAttributes(append(key, AttrOutcome.String(e.Outcome.String()), AttrRenewal.Bool(e.Renewal))...)}
}
