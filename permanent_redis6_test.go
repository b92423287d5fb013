package redlock

import "testing"

// TestPermanentRedis6WrappedReplies: before Redis 7, an error that a command inside a
// script raised reached the caller wrapped in "ERR Error running script", whatever its
// own code. Transient replies from inside the script must not end Acquire at once:
// READONLY (a Sentinel- or Cluster-managed member talking to a demoted master during a
// failover), OOM (maxmemory reached for a moment), NOREPLICAS, MISCONF; a permanent
// one (WRONGTYPE) and a failure of the script itself still do. (The texts are those
// Redis 6.2 sends; Redis 7 puts the inner code first.)
func TestPermanentRedis6WrappedReplies(t *testing.T) {
	for _, msg := range []string{
		"ERR Error running script (call to f_8f3b1d): @user_script:13: @user_script: 13: -READONLY You can't write against a read only replica. ",
		"ERR Error running script (call to f_8f3b1d): @user_script:13: @user_script: 13: -OOM command not allowed when used memory > 'maxmemory'. ",
		"ERR Error running script (call to f_8f3b1d): @user_script:13: @user_script: 13: -NOREPLICAS Not enough good replicas to write. ",
		"ERR Error running script (call to f_8f3b1d): @user_script:13: @user_script: 13: -MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. ",
	} {
		if permanent(replyError(msg)) {
			t.Errorf("permanent(%q) = true: a transient reply wrapped by Redis 6 ends Acquire at once", msg)
		}
	}
	for _, msg := range []string{
		"ERR Error running script (call to f_8f3b1d): @user_script:13: @user_script: 13: -WRONGTYPE Operation against a key holding the wrong kind of value ",
		"ERR Error running script (call to f_8f3b1d): @user_script:1: user_script:1: attempt to compare nil with number ",
	} {
		if !permanent(replyError(msg)) {
			t.Errorf("permanent(%q) = false, want true", msg)
		}
	}
}
