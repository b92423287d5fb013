package redlock

import (
	_ "embed" // the Lua scripts are files in scripts/
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The server-side steps, one Lua file each. redis.Script sends EVALSHA and falls back to
// EVAL when a node answers NOSCRIPT (after a restart, a failover or SCRIPT FLUSH).
var (
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/extend.lua
	extendLua string
	//go:embed scripts/decimal.lua
	decimalLua string // put in front of the fencing scripts, which compare tokens with it
	//go:embed scripts/fence_read.lua
	fenceReadLua string
	//go:embed scripts/fenced_acquire.lua
	fencedAcquireLua string
	//go:embed scripts/handoff.lua
	handoffLua string

	stepAcquire       = step{redis.NewScript(acquireLua), acquireReply, false, nil}
	stepRelease       = step{redis.NewScript(releaseLua), released, false, nil}
	stepExtend        = step{redis.NewScript(extendLua), yesOrNo, false, nil}
	stepFenceRead     = step{redis.NewScript(decimalLua + fenceReadLua), counter, true, nil}
	stepFencedAcquire = step{redis.NewScript(decimalLua + fencedAcquireLua), fencedReply, true, nil}
	stepHandoff       = step{redis.NewScript(handoffLua), yesOrNo, false, nil}
)

// step is one server-side script and the meaning of its integer reply.
type step struct {
	script *redis.Script
	judge  func(v int64) outcome
	// fencing: a fencing script. Its last KEYS are the fencing counter's names, which
	// depend on the kind of node (fenceKeys), so Client.start adds them per node; and it
	// answers a counter as a decimal string (a Lua number is a double: it would lose
	// digits above 2^53, and Redis would turn one above 2^63 into a negative integer),
	// a refused proposal as "-c".
	fencing bool
	// text, when not nil, judges a fencing script's text replies, and judge its
	// integer replies only: fair_fenced_acquire.lua answers a refusal "-c" as text and
	// a waiter's place as a negative integer, in ranges that overlap.
	text func(v int64) outcome
}

// acquireReply judges acquire.lua: 1 yes; 0, 2 (the key still holds the token whose
// release was announced: replyGoneHere) or 3 (replyTurn), no.
func acquireReply(v int64) outcome {
	if v == replyGoneHere || v == replyTurn {
		return outNo
	}
	return yesOrNo(v)
}

// replyGoneHere is acquire.lua's answer that the key still holds the token given as
// released: the release has not reached the node yet (round.followLead).
const replyGoneHere = 2

// replyTurn is acquire.lua's answer, on the key's line node, that the key is free but
// kept for the line's head, another Client (line.go): the attempt lost there, and
// comes again when the turn is over (waiter.turn).
const replyTurn = 3

// yesOrNo judges the scripts that answer 1 (did it) or 0 (did not).
func yesOrNo(v int64) outcome {
	switch v {
	case 1:
		return outYes
	case 0:
		return outNo
	}
	return outFailed
}

// released judges release.lua: 1 + listeners (deleted) and 0 (absent: nothing of ours
// left, also when an earlier copy of the same call deleted it) both mean our token is
// gone from the node; −1 means another token holds the key.
func released(v int64) outcome {
	switch {
	case v >= 0:
		return outYes
	case v == -1:
		return outNo
	}
	return outFailed
}

// counter judges fence_read.lua: any counter value ≥ 0 is an answer.
func counter(v int64) outcome {
	if v >= 0 {
		return outYes
	}
	return outFailed
}

// fencedReply judges fenced_acquire.lua: 1 took it, 0 held elsewhere, −c refused.
func fencedReply(v int64) outcome {
	if v < 0 {
		return outRefused
	}
	return yesOrNo(v)
}

// outcome is what one node did in one step.
type outcome uint8

const (
	// outYes: the node did what was asked (took, refreshed, extended or deleted our key),
	// or, for a release, holds no key of ours any more.
	outYes outcome = iota + 1
	// outNo: another token holds the key (acquire, release), or ours is gone (extend).
	outNo
	// outRefused: the node's fencing counter is at or above our proposal; counts as no.
	outRefused
	// outFailed: an error reply, a network error or no reply in time.
	outFailed
)

// node is one member of the quorum: an independent Redis master (or a Sentinel- or
// Cluster-managed client that plays that role) and the name errors show for it.
type node struct {
	name    string
	rdb     redis.UniversalClient
	s       *sender // queues and sends the calls to this node (sender.go)
	cluster bool    // rdb is a Redis Cluster client: a fencing counter needs KEY's slot
	hash    uint64  // FNV-1a of name: its rank for a key's lead (Client.lead)
	// own: rdb is one of go-redis's own clients, whose EvalSha sends what Process sends
	// for the same command (nodeCall.evalSha). A caller's wrapper type may override
	// EvalSha (to count or trace calls): a call sent alone goes through that EvalSha;
	// calls batched into one pipeline go through the pipeline's (rdb.Pipeline()).
	own bool
}

// ownClient reports whether rdb is one of go-redis's client types, not a caller's type
// that wraps one (and may override its methods).
func ownClient(rdb redis.UniversalClient) bool {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// nodeName returns a printable name for a client: its address, or a description of a
// Sentinel- or Cluster-managed client. Client options never print passwords here.
func nodeName(rdb redis.UniversalClient, index int) string {
	switch c := rdb.(type) {
	case *redis.Client:
		opt := c.Options()
		if opt.Addr == "FailoverClient" { // go-redis's placeholder for Sentinel clients
			return fmt.Sprintf("sentinel-managed node %d", index+1)
		}
		if opt.DB != 0 {
			return fmt.Sprintf("%s/%d", opt.Addr, opt.DB)
		}
		return opt.Addr
	case *redis.ClusterClient:
		return "cluster[" + strings.Join(c.Options().Addrs, ",") + "]"
	case *redis.Ring:
		return fmt.Sprintf("ring node %d", index+1)
	}
	return fmt.Sprintf("node %d", index+1)
}
