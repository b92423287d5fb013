package nemesis

import (
	"testing"
	"time"
)

// TestKeepAliveContextOutlivesLock (review): a KeepAlive session relies on the context
// KeepAlive returns, which must end "at the latest at Until − ttl/10" when renewals
// fail. Its window in the lease-mutex check ends at the lock's final Until (or the
// Release), not when the worker stopped relying on that context, so a KeepAlive that
// leaves its context live after its renewals failed is not seen: here the worker's
// context lasted to 2000 ms while its last Until was 1000 ms, and b held the key from
// 1200 ms to 1500 ms. Do sessions get the analogous window (fn's run) and would be
// caught.
func TestKeepAliveContextOutlivesLock(t *testing.T) {
	m := int64(time.Millisecond)
	a := []Record{
		{Op: OpAcquire, Session: "a", Kind: SessKeepAlive, Key: "k", Inv: 0, Ret: 10 * m, Ok: true, Until: 1000 * m},
		// KeepAlive from 10 ms; the worker slept on its context until 2000 ms, and
		// the context ended without ErrLockLost as its cause (so Ok).
		{Op: OpKeepAlive, Session: "a", Kind: SessKeepAlive, Key: "k", Inv: 10 * m, Ret: 2000 * m, Ok: true, Until: 1000 * m},
		{Op: OpEnd, Session: "a", Kind: SessKeepAlive, Key: "k", Inv: 1000 * m, Ret: 1000 * m, Until: 1000 * m},
		{Op: OpRelease, Session: "a", Kind: SessKeepAlive, Key: "k", Inv: 2000 * m, Ret: 2001 * m, Err: "lock-lost"},
	}
	b := window("b", 1, 1100, 1200, 1500)
	if rep := checkOnly(a, b); rep.OK() {
		t.Errorf("a's work ran on its KeepAlive context to 2000 ms while b held the key from 1200 ms: no violation reported")
	}
}
