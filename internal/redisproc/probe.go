// Package redisproc launches Redis binaries (redis-server, redis-sentinel) as child
// processes on loopback ports and stops them by PID: the engine under the root module's
// test launcher (internal/redistest) and the fault kit redlocktest. It needs nothing
// beyond go-redis and the standard library, so the library's own tests do not pull the
// kit's modules (Docker, Toxiproxy) into the library's module graph.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	readyTimeout  = 10 * time.Second
	pollInterval  = 5 * time.Millisecond
	probeTimeout  = 250 * time.Millisecond // redis answers PING in microseconds
	startAttempts = 5
	logTailLines  = 20
	addrInUseText = "Address already in use"
)

// ErrExited reports that the server exited before it became ready.
var ErrExited = errors.New("server exited before answering PING")

// FreePort asks the kernel for a free TCP port on 127.0.0.1 and releases it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// Loopback returns "127.0.0.1:port".
func Loopback(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// WaitReady polls addr until the server answers PING with PONG, exited reports that it
// is gone, ctx ends, or readyTimeout passes. A pid > 0 must also be the process_id the server
// reports, so that another server that grabbed the port does not count.
func WaitReady(ctx context.Context, addr string, pid int, exited func() bool) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if exited() {
			return ErrExited
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s not ready: %w", addr, err)
		}
		err := Probe(addr, pid)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %v", addr, readyTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// Probe sends PING to addr and, if the reply is PONG and pid > 0, checks with INFO that
// the server answering is that process. It speaks through a go-redis client on a
// connection it dials itself, so that a refused connection, the common case while a
// server starts, is not logged by go-redis's pool; the client is closed before probe
// returns, so nothing of it outlives the probe.
func Probe(addr string, pid int) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	var used atomic.Bool // go-redis dials on a goroutine of its own
	defer func() {
		if !used.Load() { // go-redis never took it
			_ = conn.Close()
		}
	}()
	c := redis.NewClient(&redis.Options{
		Addr: addr,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			if used.Swap(true) { // one connection per probe; it is not redialed
				return nil, errors.New("probe connection already used")
			}
			return conn, nil
		},
		Protocol:        2,    // no HELLO 3 negotiation needed for PING and INFO
		DisableIdentity: true, // no CLIENT SETINFO
		ReadTimeout:     probeTimeout,
		WriteTimeout:    probeTimeout,
		MaxRetries:      -1,
		PoolSize:        1,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()

	pong, err := c.Ping(ctx).Result()
	if err != nil {
		// "LOADING ..." while the dataset is loaded, or an unexpected reply.
		return fmt.Errorf("PING: %w", err)
	}
	if pong != "PONG" {
		return fmt.Errorf("PING replied %q", pong)
	}
	if pid <= 0 {
		return nil
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("INFO: %w", err)
	}
	if !strings.Contains(info, "\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("%s is served by a process other than pid %d", addr, pid)
	}
	return nil
}

// StartError describes a server that did not become ready.
type StartError struct {
	Err     error
	Port    int
	LogName string // where the log lines come from
	LogTail string // the last lines the server wrote
}

// Error names the port and quotes the end of the log.
func (e *StartError) Error() string {
	return fmt.Sprintf("%v (port %d)\n--- last lines of %s ---\n%s", e.Err, e.Port, e.LogName, e.LogTail)
}

// Unwrap returns the reason the server was not ready.
func (e *StartError) Unwrap() error { return e.Err }

// PortTaken reports whether the server exited because a port was in use.
func (e *StartError) PortTaken() bool {
	return errors.Is(e.Err, ErrExited) && strings.Contains(e.LogTail, addrInUseText)
}

// RetryPorts runs launch with fresh ports until it succeeds, fails for a reason other
// than a port taken between FreePort and the server binding it, or startAttempts
// attempts have been made. logf, when not nil, hears about each retry.
func RetryPorts(ctx context.Context, logf func(format string, args ...any), what string, launch func() error) error {
	for attempt := 1; ; attempt++ {
		err := launch()
		if err == nil {
			return nil
		}
		var se *StartError
		if attempt < startAttempts && ctx.Err() == nil && errors.As(err, &se) && se.PortTaken() {
			if logf != nil {
				logf("port %d was taken, retrying with another port", se.Port)
			}
			continue
		}
		return fmt.Errorf("starting %s: %w", what, err)
	}
}

// TailText returns the last logTailLines lines of text.
func TailText(text string) string {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return "(log is empty)"
	}
	lines := strings.Split(text, "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}

// LogTail returns the last lines of the log file written since offset.
func LogTail(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if offset > int64(len(data)) {
		offset = 0
	}
	return TailText(string(data[offset:]))
}
