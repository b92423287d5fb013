package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/go-multierror"
)

// replyError is an error reply as go-redis returns it (a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestPermanent(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{replyError("CROSSSLOT Keys in request don't hash to the same slot"), true},
		{replyError("NOPERM this user has no permissions to run the 'evalsha' command"), true},
		{replyError("NOAUTH Authentication required."), true},
		{replyError("WRONGPASS invalid username-password pair or user is disabled."), true},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value script: x"), true},
		{replyError("ERR unknown command 'evalsha', with args beginning with: "), true},
		{replyError("ERR user_script:1: attempt to compare nil with number script: x"), true},
		{replyError("ERR Error running script (call to f_x): @user_script:1: oops"), true},
		{replyError("ERR Error compiling script (new function): user_script:1: oops"), true},
		{fmt.Errorf("wrapped: %w", replyError("NOPERM no")), true},
		{replyError("READONLY You can't write against a read only replica."), false},
		{replyError("LOADING Redis is loading the dataset in memory"), false},
		{replyError("BUSY Redis is busy running a script."), false},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), false},
		{replyError("MOVED 3999 127.0.0.1:6381"), false},
		{replyError("CLUSTERDOWN The cluster is down"), false},
		{replyError("NOSCRIPT No matching script."), false},
		{errors.New("CROSSSLOT not a reply"), false}, // text alone is not a reply
		{ErrNodeTimeout, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := permanent(tt.err); got != tt.want {
			t.Errorf("permanent(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestHopeless(t *testing.T) {
	perm := &NodeError{Node: "a", Err: replyError("NOPERM no")}
	slow := &NodeError{Node: "b", Err: ErrNodeTimeout}
	tests := []struct {
		errs []error
		want bool
	}{
		{nil, false},
		{[]error{perm}, false},       // one of three: a majority may still answer
		{[]error{perm, slow}, false}, // the timeout may pass
		{[]error{perm, perm}, true},
		{[]error{perm, perm, slow}, true},
	}
	for _, tt := range tests {
		qe := &QuorumError{Nodes: 3, Needed: 2}
		if tt.errs != nil {
			qe.Errors = multierror.Append(nil, tt.errs...)
		}
		if got := qe.hopeless(); got != tt.want {
			t.Errorf("hopeless with %v = %v, want %v", tt.errs, got, tt.want)
		}
	}
}
