package redlocktest

import "context"

// T is the part of testing.TB that the kit calls: *testing.T, *testing.B, *testing.F
// and every testing.TB satisfy it, so tests pass their own t. The package does not
// import testing, so a program that links the kit (the redlock CLI) does not carry it;
// such a program either uses the error-returning core (StartProcess, Process.Close) or
// hands the kit a T of its own (Run). T is the kit's own interface: it changes only
// with this package, never because a Go release adds a method to testing.TB.
//
// Fatalf and Skipf must end the calling goroutine (as runtime.Goexit does), like
// testing.TB's; the kit's helpers rely on not returning from them.
type T interface {
	// Helper marks the caller as a helper function, for line numbers in messages.
	Helper()
	// Cleanup registers fn to run, last first, when the test (or Run) ends.
	Cleanup(fn func())
	// Context returns a context that ends just before the clean-ups run.
	Context() context.Context
	// Errorf reports a failure and continues.
	Errorf(format string, args ...any)
	// Fatalf reports a failure and ends the calling goroutine.
	Fatalf(format string, args ...any)
	// Logf writes a message to the test's (or the program's) log.
	Logf(format string, args ...any)
	// Skipf logs a message, marks the test skipped and ends the calling goroutine.
	Skipf(format string, args ...any)
	// TempDir returns a new directory that is removed when the test ends.
	TempDir() string
}
