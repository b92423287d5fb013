// Package redlockotel reports the steps of a redlock Client as OpenTelemetry metrics
// and spans. An Observer made by New goes into redlock.Options.Observer:
//
//	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp))
//	...
//	client, err := redlock.New(nodes, redlock.Options{Observer: obs})
//
// Metrics (docs/observability.md explains each one and what to alert on):
//
//	redlock.acquire.duration  histogram, s         Acquire and TryAcquire, by redlock.outcome
//	redlock.acquire.attempts  histogram, {attempt} attempts per Acquire, by redlock.outcome
//	redlock.extend.duration   histogram, s         Extend, by redlock.outcome and redlock.renewal
//	redlock.node.errors       counter, {error}     failed node replies, by redlock.node, error.type, redlock.op
//	redlock.locks.held        up/down, {lock}      +1 per granted Acquire, −1 when the lock ends
//	redlock.locks.lost        counter, {lock}      locks that ended lost, by redlock.op
//	redlock.handoffs          counter, {handoff}   Releases that handed the lock to a waiter
//	redlock.fence.refusals    counter, {refusal}   node replies refusing a fencing token
//
// Node errors are counted from the replies an event carries, which are those of the
// step's last round (redlock.Event.Nodes): the failures of an Acquire's earlier
// attempts are not counted.
//
// Spans: one per event, named "redlock.acquire", "redlock.extend", "redlock.release"
// and "redlock.keepalive" (a KeepAlive that gave up), of kind client, started in the
// context the step ran with (so it joins the caller's trace) at redlock.Event.Start and
// ended at Start + Duration. Each node reply is a span event "redlock.node" at the time
// it came. The span's status is Error when the step failed in a way that needs a look:
// the outcomes unavailable, invalid, lost and closed. It stays unset for ok,
// not_acquired (another holder: the lock works as meant) and canceled (the caller's
// own budget or cancellation ended the wait); for every outcome but ok the span has
// the attribute error.type set to the outcome's name.
//
// Keys are attributes (redlock.key) only with WithKeys(true): a program that locks
// one key per order or user would otherwise create a time series per key.
//
// The times come from redlock.Options.Clock: with a fake clock, the spans are on it.
package redlockotel
