package redlockotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// The metric names, as docs/observability.md lists them.
const (
	MetricAcquireDuration = "redlock.acquire.duration"
	MetricAcquireAttempts = "redlock.acquire.attempts"
	MetricExtendDuration  = "redlock.extend.duration"
	MetricNodeErrors      = "redlock.node.errors"
	MetricLocksHeld       = "redlock.locks.held"
	MetricLocksLost       = "redlock.locks.lost"
	MetricHandoffs        = "redlock.handoffs"
	MetricFenceRefusals   = "redlock.fence.refusals"
)

// durationBuckets are the histogram boundaries of the durations, in seconds: a step
// takes a round trip when it is uncontended (well under a millisecond on a LAN), a node
// timeout (50 ms by default) when a node is down, and up to the caller's budget when
// Acquire waits for a holder.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// attemptBuckets are the boundaries of the attempts histogram.
var attemptBuckets = []float64{1, 2, 3, 5, 10, 20, 50, 100, 1000}

// instruments are the Observer's metrics.
type instruments struct {
	acquireDuration metric.Float64Histogram
	acquireAttempts metric.Int64Histogram
	extendDuration  metric.Float64Histogram
	nodeErrors      metric.Int64Counter
	held            metric.Int64UpDownCounter
	lost            metric.Int64Counter
	handoffs        metric.Int64Counter
	fenceRefusals   metric.Int64Counter
}

// init creates the instruments on m.
func (in *instruments) init(m metric.Meter) error {
	var err, e error
	in.acquireDuration, e = m.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of Acquire and TryAcquire calls, waiting included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	in.acquireAttempts, e = m.Int64Histogram(MetricAcquireAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Acquisition attempts made by one Acquire or TryAcquire call."),
		metric.WithExplicitBucketBoundaries(attemptBuckets...))
	err = errors.Join(err, e)
	in.extendDuration, e = m.Float64Histogram(MetricExtendDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of Extend calls, KeepAlive's renewals included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	in.nodeErrors, e = m.Int64Counter(MetricNodeErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Node replies that failed (an error or no answer in time), in the last round of each step."))
	err = errors.Join(err, e)
	in.held, e = m.Int64UpDownCounter(MetricLocksHeld, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks granted and not yet released or found lost."))
	err = errors.Join(err, e)
	in.lost, e = m.Int64Counter(MetricLocksLost, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks found lost while held (expired, token gone, renewals failed)."))
	err = errors.Join(err, e)
	in.handoffs, e = m.Int64Counter(MetricHandoffs, metric.WithUnit("{handoff}"),
		metric.WithDescription("Releases that handed the lock straight to a waiter of the same Client."))
	err = errors.Join(err, e)
	in.fenceRefusals, e = m.Int64Counter(MetricFenceRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("Node replies that refused a proposed fencing token (the step retried with a higher one)."))
	return errors.Join(err, e)
}
