package nemesis

import (
	"testing"
	"time"
)

// TestKeepAliveContextOutlivesLock: a KeepAlive session relies on the context
// KeepAlive returns, which must end "at the latest at Until − ttl/10" when renewals
// fail. So its window in the lease-mutex check lasts at least until the worker saw that
// context end, not only to the lock's last Until: here the worker's context lasted to
// 2000 ms while its last Until was 1000 ms, and b held the key from 1200 ms to 1500 ms,
// which must be reported (it was not, when the window ended at Until).
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
