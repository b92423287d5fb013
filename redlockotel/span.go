package redlockotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
)

// clientKind is the kind of every span: a call out to the nodes.
var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// spanName returns the name of op's span.
func spanName(op redlock.Op) string {
	switch op {
	case redlock.OpAcquire:
		return "redlock.acquire"
	case redlock.OpExtend:
		return "redlock.extend"
	case redlock.OpRelease:
		return "redlock.release"
	case redlock.OpKeepAlive:
		return "redlock.keepalive"
	}
	return "redlock." + op.String()
}

// span records e as a span in ctx's trace, from e.Start to e.Start + e.Duration, with
// one span event per node reply.
func (o *Observer) span(ctx context.Context, e *redlock.Event) {
	if o.tracer == nil {
		return // spans off: WithTracerProvider(noop.NewTracerProvider())
	}
	// The attributes are set after the start, so that a span not recorded (no tracer
	// provider, or not sampled) costs no attribute list: a sampler sees none of them.
	_, sp := o.tracer.Start(ctx, spanName(e.Op), trace.WithTimestamp(e.Start), clientKind)
	if !sp.IsRecording() {
		return
	}
	sp.SetAttributes(o.spanAttrs(e)...)
	end := e.Start.Add(e.Duration)
	for _, n := range e.Nodes {
		at := end // a pending node had not answered when the step was decided
		if n.Result != redlock.ResultPending {
			at = e.Start.Add(n.At)
		}
		na := []attribute.KeyValue{AttrNode.String(n.Node), AttrResult.String(n.Result.String()),
			AttrNodeAfter.Float64(n.At.Seconds())}
		if n.Class != "" {
			na = append(na, AttrErrorType.String(n.Class))
		}
		sp.AddEvent("redlock.node", trace.WithTimestamp(at), trace.WithAttributes(na...))
	}
	if failed(e.Outcome) {
		msg := e.Outcome.String()
		if e.Err != nil {
			msg = e.Err.Error()
		}
		sp.SetStatus(codes.Error, msg)
	}
	sp.End(trace.WithTimestamp(end))
}

// spanAttrs returns the attributes of e's span.
func (o *Observer) spanAttrs(e *redlock.Event) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, AttrOutcome.String(e.Outcome.String()))
	if o.keys {
		attrs = append(attrs, AttrKey.String(e.Key))
	}
	if e.TTL > 0 {
		attrs = append(attrs, AttrTTL.Float64(e.TTL.Seconds()))
	}
	switch e.Op {
	case redlock.OpAcquire:
		attrs = append(attrs, AttrAttempts.Int(e.Attempts))
	case redlock.OpExtend:
		attrs = append(attrs, AttrRenewal.Bool(e.Renewal))
	}
	if e.Fence != 0 {
		attrs = append(attrs, AttrFence.Int64(int64(e.Fence)))
	}
	if e.Handoff {
		attrs = append(attrs, AttrHandoff.Bool(true))
	}
	if e.Lost {
		attrs = append(attrs, AttrLost.Bool(true))
	}
	if e.FenceRefusals > 0 {
		attrs = append(attrs, AttrRefusals.Int(e.FenceRefusals))
	}
	if e.Outcome != redlock.OutcomeOK {
		attrs = append(attrs, AttrErrorType.String(e.Outcome.String()))
	}
	return attrs
}

// failed reports whether a step with this outcome sets the span's status to Error.
func failed(o redlock.Outcome) bool {
	switch o {
	case redlock.OutcomeOK, redlock.OutcomeNotAcquired, redlock.OutcomeCanceled:
		return false
	}
	return true
}
