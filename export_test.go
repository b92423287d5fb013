package redlock

// WaitForCalls blocks until every node call this lock has started has returned. Tests
// use it to inspect the nodes after a step that decided on a majority early.
func (l *Lock) WaitForCalls() {
	l.op.Lock()
	defer l.op.Unlock()
	for _, done := range l.calls {
		<-done
	}
}
