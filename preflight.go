package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// ErrNodeConfig means a node runs with a setting that breaks an assumption of the
// lock's guarantees (see CheckNodes).
var ErrNodeConfig = errors.New("redlock: node setting breaks a safety assumption")

// CheckNodes asks every node for the settings the guarantees depend on and returns an
// error wrapping ErrNodeConfig, with one *NodeError per node that does not comply:
//   - maxmemory-policy must be noeviction: any other policy may evict a held lock key
//     (every lock key has a TTL, so even volatile-* policies pick them);
//   - with Options.Fencing, appendonly yes and appendfsync always: a node that restarts
//     without its fencing counter can hand out a token twice.
//
// A node that cannot answer (down, or CONFIG not allowed by its ACL or by a managed
// service) is reported with that error instead; check its settings by other means.
// New does not call it, so that a Client can be made while nodes are down; call it at
// start-up, or from a health check.
func (c *Client) CheckNodes(ctx context.Context) error {
	want := map[string]string{"maxmemory-policy": "noeviction"}
	if c.opts.Fencing {
		want["appendonly"] = "yes"
		want["appendfsync"] = "always"
	}
	var errs *multierror.Error
	for _, n := range c.nodes {
		var wrong []string
		for name, value := range want {
			got, err := n.rdb.ConfigGet(ctx, name).Result()
			if err != nil {
				errs = multierror.Append(errs, &NodeError{Node: n.name, Err: fmt.Errorf("CONFIG GET %s: %w", name, err)})
				wrong = nil
				break
			}
			if got[name] != value {
				wrong = append(wrong, fmt.Sprintf("%s is %q, want %q", name, got[name], value))
			}
		}
		if len(wrong) > 0 {
			errs = multierror.Append(errs, &NodeError{Node: n.name, Err: fmt.Errorf("%w: %s", ErrNodeConfig, strings.Join(wrong, ", "))})
		}
	}
	finish(&errs)
	return errs.ErrorOrNil()
}
