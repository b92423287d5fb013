package redlocktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	readyTimeout  = 10 * time.Second
	pollInterval  = 5 * time.Millisecond
	probeTimeout  = 250 * time.Millisecond // redis answers PING in microseconds
	startAttempts = 5
	logTailLines  = 20
	addrInUseText = "Address already in use"
)

// pickPort chooses the port for a new server; tests replace it to simulate a port
// taken by another process.
var pickPort = freePort

// errExited reports that the server exited before it became ready.
var errExited = errors.New("server exited before answering PING")

// freePort asks the kernel for a free TCP port on 127.0.0.1 and releases it.
func freePort() (int, error) {
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

// loopback returns "127.0.0.1:port".
func loopback(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// waitReady polls addr until the server answers PING with PONG, exited reports that it
// is gone, ctx ends, or readyTimeout passes. A pid > 0 must also be the process_id the server
// reports, so that another server that grabbed the port does not count.
func waitReady(ctx context.Context, addr string, pid int, exited func() bool) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if exited() {
			return errExited
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s not ready: %w", addr, err)
		}
		err := probe(addr, pid)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %v", addr, readyTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// probe sends PING to addr over a raw TCP connection (no client library, so no
// goroutines) and, if the reply is PONG and pid > 0, checks with INFO that the server
// answering is that process. Both commands are pipelined.
func probe(addr string, pid int) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "PING\r\nINFO server\r\n"); err != nil {
		return err
	}

	r := bufio.NewReader(conn)
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if line != "+PONG" {
		// "-LOADING ..." while the dataset is loaded, or an unexpected reply.
		return fmt.Errorf("PING replied %q", line)
	}
	if pid <= 0 {
		return nil
	}

	header, err := readLine(r)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(header, "$"))
	if !strings.HasPrefix(header, "$") || err != nil || n < 0 {
		return fmt.Errorf("INFO replied %q", header)
	}
	body := make([]byte, n+2) // payload and trailing CRLF
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("%s is served by a process other than pid %d", addr, pid)
	}
	return nil
}

// readLine reads one CRLF-terminated RESP line without the terminator.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// startError describes a server that did not become ready.
type startError struct {
	err     error
	port    int
	logName string // where the log lines come from
	logTail string // the last lines the server wrote
}

func (e *startError) Error() string {
	return fmt.Sprintf("%v (port %d)\n--- last lines of %s ---\n%s", e.err, e.port, e.logName, e.logTail)
}

func (e *startError) Unwrap() error { return e.err }

// portTaken reports whether the server exited because a port was in use.
func (e *startError) portTaken() bool {
	return errors.Is(e.err, errExited) && strings.Contains(e.logTail, addrInUseText)
}

// retryPorts runs launch with fresh ports until it succeeds, fails for a reason other
// than a port taken between freePort and the server binding it, or startAttempts
// attempts have been made. logf, when not nil, hears about each retry.
func retryPorts(ctx context.Context, logf func(format string, args ...any), what string, launch func() error) error {
	for attempt := 1; ; attempt++ {
		err := launch()
		if err == nil {
			return nil
		}
		var se *startError
		if attempt < startAttempts && ctx.Err() == nil && errors.As(err, &se) && se.portTaken() {
			if logf != nil {
				logf("redlocktest: port %d was taken, retrying with another port", se.port)
			}
			continue
		}
		return fmt.Errorf("starting %s: %w", what, err)
	}
}

// tailText returns the last logTailLines lines of text.
func tailText(text string) string {
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

// logTail returns the last lines of the log file written since offset.
func logTail(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if offset > int64(len(data)) {
		offset = 0
	}
	return tailText(string(data[offset:]))
}
