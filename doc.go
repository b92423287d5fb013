// Package redlock is a mutual-exclusion lock held across N independent Redis masters:
// the Redlock algorithm, so that one crashed, stalled or wiped node does not grant the
// lock twice.
//
// # The algorithm
//
//  1. Each attempt of Acquire makes a random token (a UUID v4 from crypto/rand).
//  2. It sends SET key token NX PX ttl (scripts/acquire.lua) to all N nodes at once and
//     waits at most Options.NodeTimeout for their replies.
//  3. It measures the elapsed time on the monotonic clock from just before the first
//     request; validity = ttl − elapsed − (ttl × DriftFactor + 2 ms).
//  4. The lock is granted iff at least N/2+1 nodes said yes and validity > 0. Otherwise
//     the key is released on every node that may hold it (a timed-out SET may still
//     land) and Acquire retries when the lock is released, or after a jittered delay,
//     until its context ends.
//  5. Release and Extend compare the token before DEL or PEXPIRE (scripts/release.lua,
//     scripts/extend.lua), so a late holder never touches the next holder's lock.
//
// # What is guaranteed, and under which assumptions
//
// While a majority of nodes is up and reachable, at most one Lock for a key is valid
// (before its Until) at any moment, provided that:
//   - the nodes' clocks run at about the same rate as this process's, with an error well
//     below DriftFactor (Redis expires keys on its wall clock: a step of a node's clock
//     can expire a lock early);
//   - a node that restarts either kept its data (appendonly yes, appendfsync always) or
//     stays down for longer than the largest TTL in use;
//   - each node is an independent master: no asynchronous replica is promoted behind it;
//   - no eviction policy other than noeviction can drop lock keys.
//
// Nothing protects work that runs past Until: a process paused (GC, SIGSTOP, swapping)
// after Acquire returned can wake up after another holder took over. Check Until before
// each side effect, keep work well inside the TTL, and fence the protected resource.
//
// # Waiting for a lock
//
// Acquire calls of one Client for the same key queue in arrival order. A Release by
// this Client hands the lock straight to the next one in a single step (handoff.lua
// replaces the token on every node; at most 16 times in a row, then the key is freed
// so that other Clients get their turn). Releases by other Clients reach the waiting
// Client through an announcement that release.lua publishes on each node and the
// Client hears over one pub/sub connection per node. Polling with Options.RetryDelay
// remains the fallback (for a lock that expires, or announcements lost while a node is
// down).
//
// # Errors
//
// Failed steps return a *QuorumError that matches, with errors.Is, exactly one of
// ErrNotAcquired (held elsewhere), ErrUnavailable (too many nodes failed or were too
// slow) or ErrLockLost (the lock is no longer held), plus the context's error when the
// caller's context ended. Each failed node's cause is a *NodeError naming the node.
// Client.Do's error is a *RunError when its function ran, and matches ErrNotRun when it
// did not.
//
// # Concurrency
//
// A Client and a Lock are safe for concurrent use. A Lock's Extend and Release run one
// at a time. Node calls that a step stopped waiting for finish in the background; Close
// waits for them.
package redlock
