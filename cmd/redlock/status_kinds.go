package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// What status shows of the two lock kinds whose keys hold more than a token: a fair
// key's queue (Options.Fair, kept beside the key under redlock.FairKeys) and an
// owner's key (redlock.WithOwner: "owner <length>:<owner>|", with fencing "#<token>|",
// then one hold id and "|" per hold; docs/reentrant.md, "On the nodes"). The library
// has no exported parser for either; these follow its documented formats.

// ownerKey is an owner's lock key as one node holds it.
type ownerKey struct {
	owner string
	head  string // "owner <length>:<owner>|": what identifies the holder across nodes
	holds int    // the hold ids listed
	fence string // the lease's fencing token, "" without fencing
}

// parseOwnerKey parses v as an owner's key; ok is false for anything else (a bare
// token, or a value that does not follow the format).
func parseOwnerKey(v string) (k ownerKey, ok bool) {
	rest, found := strings.CutPrefix(v, "owner ")
	if !found {
		return k, false
	}
	digits, rest, found := strings.Cut(rest, ":")
	n, err := strconv.Atoi(digits)
	if !found || err != nil || n < 1 || strconv.Itoa(n) != digits || len(rest) <= n || rest[n] != '|' {
		return k, false
	}
	k.owner, rest = rest[:n], rest[n+1:]
	k.head = v[:len(v)-len(rest)]
	if f, after, found := strings.Cut(rest, "|"); found && strings.HasPrefix(f, "#") {
		k.fence, rest = f[1:], after
	}
	if rest != "" && !strings.HasSuffix(rest, "|") {
		return ownerKey{}, false
	}
	k.holds = strings.Count(rest, "|")
	return k, true
}

// maxOwnerShown is how many characters of an owner status shows.
const maxOwnerShown = 24

// holderOf returns what identifies the holder of a key value across the nodes (an
// owner's head, whatever holds each node lists; else the token) and how to show it.
func holderOf(value string) (id, shown string) {
	if k, ok := parseOwnerKey(value); ok {
		return k.head, "owner " + clip(k.owner, maxOwnerShown)
	}
	return value, short(value)
}

// fairQueue is a fair key's queue on one node.
type fairQueue struct {
	counter string // the ticket counter, "" when absent
	size    int64  // entries queued, expired ones included until a script drops them
	waiters []queuedWaiter
}

// queuedWaiter is one entry of a fair queue, in queue order.
type queuedWaiter struct {
	id     string
	ticket string
	// left is the time until its lease ends on the node's clock; negative once it has
	// ended (the next fair script drops it); noLease marks an entry without a lease.
	left    time.Duration
	noLease bool
}

// maxShownWaiters is how many waiters per node status lists; the rest are counted.
const maxShownWaiters = 20

// fairReadLua reads a fair key's queue in one step on the node that holds KEY's slot:
// the node's clock, the counter, the queue's size and its first ARGV[1] entries, each
// with its ticket and the end of its lease. It writes nothing.
const fairReadLua = `
local t = redis.call('TIME')
local q = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local w = {}
for i = 1, #q, 2 do
  w[#w + 1] = q[i]
  w[#w + 1] = q[i + 1]
  w[#w + 1] = redis.call('ZSCORE', KEYS[2], q[i]) or ''
end
return {t[1], t[2], redis.call('GET', KEYS[3]) or '', redis.call('ZCARD', KEYS[1]), w}`

// queueFairRead adds the read of key's fair queue to a pipeline.
func queueFairRead(ctx context.Context, p redis.Pipeliner, key string) *redis.Cmd {
	q, l, n := redlock.FairKeys(key)
	return p.Eval(ctx, fairReadLua, []string{q, l, n}, maxShownWaiters)
}

// fairResult returns the queue that cmd read: nil when the node has neither a queue
// nor a counter for the key.
func fairResult(cmd *redis.Cmd) (*fairQueue, error) {
	v, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("unexpected reply %v", v)
	if len(v) != 5 {
		return nil, bad
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	size, ok3 := v[3].(int64)
	entries, ok4 := v[4].([]any)
	if err1 != nil || err2 != nil || !ok3 || !ok4 || len(entries)%3 != 0 {
		return nil, bad
	}
	q := &fairQueue{counter: fmt.Sprint(v[2]), size: size}
	if q.counter == "" && size == 0 {
		return nil, nil
	}
	nowMs := sec*1000 + usec/1000
	for i := 0; i < len(entries); i += 3 {
		w := queuedWaiter{id: fmt.Sprint(entries[i]), ticket: fmt.Sprint(entries[i+1])}
		end, err := strconv.ParseFloat(fmt.Sprint(entries[i+2]), 64)
		if err != nil {
			w.noLease = true
		} else {
			w.left = time.Duration(int64(end)-nowMs) * time.Millisecond
		}
		q.waiters = append(q.waiters, w)
	}
	return q, nil
}

// printQueues writes the fair queues of the nodes that have one: per node the ticket
// counter, then each waiter in queue order with its ticket and the lease it has left.
func printQueues(w io.Writer, rows []nodeStatus) {
	if !hasQueue(rows) {
		return
	}
	fmt.Fprintln(w, "fair queue (waiters in the order they get the lock):")
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCOUNTER\tPOS\tWAITER\tTICKET\tLEASE LEFT\t")
	for _, r := range rows {
		switch {
		case r.err != nil:
			continue
		case r.fairErr != nil:
			fmt.Fprintf(tw, "%s\t?\t-\t-\t-\t-\t%s\n", r.name, strings.ReplaceAll(r.fairErr.Error(), "\n", "; "))
			continue
		case r.fair == nil:
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\tno queue\n", r.name)
			continue
		}
		q := r.fair
		counter := "-"
		if q.counter != "" {
			counter = printable(q.counter)
		}
		if len(q.waiters) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\tempty\n", r.name, counter)
		}
		for i, wt := range q.waiters {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t\n", r.name, counter, i+1, short(wt.id), printable(wt.ticket), leaseLeft(wt))
		}
		if more := q.size - int64(len(q.waiters)); more > 0 {
			fmt.Fprintf(tw, "%s\t%s\t...\t\t\t\t%d more\n", r.name, counter, more)
		}
	}
	tw.Flush()
	for line := range strings.Lines(table.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
}

// hasQueue reports whether any node has a fair queue or counter for the key, or
// could not be read for one.
func hasQueue(rows []nodeStatus) bool {
	for _, r := range rows {
		if r.err == nil && (r.fair != nil || r.fairErr != nil) {
			return true
		}
	}
	return false
}

// leaseLeft shows the time a waiter's entry has left.
func leaseLeft(w queuedWaiter) string {
	switch {
	case w.noLease:
		return "no lease"
	case w.left <= 0:
		return "ended"
	}
	return w.left.String()
}

// ownerCell returns the HOLDS cell of a row: the owner's hold count, "-" otherwise.
func ownerCell(r nodeStatus) string {
	if k, ok := parseOwnerKey(r.token); ok {
		return strconv.Itoa(k.holds)
	}
	return "-"
}

// anyOwner reports whether any node's key is an owner's.
func anyOwner(rows []nodeStatus) bool {
	for _, r := range rows {
		if _, ok := parseOwnerKey(r.token); r.err == nil && ok {
			return true
		}
	}
	return false
}
