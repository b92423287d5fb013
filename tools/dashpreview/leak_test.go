package main

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: the module has only the
// standard library, so this stands in for goleak. Idle keep-alive connections of the
// default transport are closed first; the count may take a moment to settle while
// closed connections' goroutines return.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before && code == 0 {
		buf := make([]byte, 1<<20)
		fmt.Fprintf(os.Stderr, "%d goroutines left running after the tests (%d before):\n%s\n", n, before, buf[:runtime.Stack(buf, true)])
		code = 1
	}
	os.Exit(code)
}
