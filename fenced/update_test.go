package fenced_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
)

// twoHolders gives two fenced locks on one key, taken the way a paused holder and its
// successor take them: A's lock, then B's once A's has expired (B's token is higher).
func twoHolders(t *testing.T) (a, b *redlock.Lock) {
	t.Helper()
	servers := redistest.StartN(t, 3, redistest.Options{})
	newClient := func() *redlock.Client {
		c, err := redlock.New(redistest.Clients(servers), redlock.Options{Fencing: true, RetryDelay: redlock.ExponentialJitter(time.Millisecond, 5*time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := t.Context()
	a, err := newClient().TryAcquire(ctx, "{stock}", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if b, err = newClient().Acquire(wait, "{stock}", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("B's token %d not above A's %d", b.Fence(), a.Fence())
	}
	return a, b
}

// decrement is the read-modify-write of a stock counter.
func decrement(old string) (string, error) {
	n, err := strconv.Atoi(old)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(n - 1), nil
}

// TestReadThenWriteLosesUpdate is the interleaving of two processes decrementing a
// stock of 1000: A reads and is paused past its TTL; B takes the lock and reads, then is
// slow; A wakes and writes 999; B writes 999. Both writes are accepted (A's token was
// the highest the resource had seen, and B's is higher still), and the stock ends at
// 999 although two units were taken: with Read then Write the fence cannot help.
func TestReadThenWriteLosesUpdate(t *testing.T) {
	resource := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	if err := resource.HSet(ctx, "stock", "value", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	a, b := twoHolders(t)
	oldA, _, _ := fenced.Read(ctx, resource, "stock")
	oldB, _, _ := fenced.Read(ctx, resource, "stock")
	newA, _ := decrement(oldA)
	newB, _ := decrement(oldB)
	if err := fenced.Write(ctx, resource, "stock", newA, a.Fence()); err != nil {
		t.Fatalf("A's write: %v", err)
	}
	if err := fenced.Write(ctx, resource, "stock", newB, b.Fence()); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	if v, _, _ := fenced.Read(ctx, resource, "stock"); v != "999" {
		t.Fatalf("stock %s; this interleaving loses A's update and ends at 999", v)
	}
}

// TestUpdateKeepsUpdate runs the same interleaving with Update: B's write finds the
// stock changed since its read, reads again and stores 998. When instead B writes
// first, A's late write is refused as stale: A learns its unit was not taken.
func TestUpdateKeepsUpdate(t *testing.T) {
	resource := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	a, b := twoHolders(t)

	// update runs Update in a goroutine; its first call of fn reports the value read
	// on read and then waits for proceed to close.
	update := func(lock *redlock.Lock, read chan<- string, proceed <-chan struct{}) <-chan error {
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			_, err := fenced.Update(ctx, resource, "stock", lock.Fence(), func(old string) (string, error) {
				once.Do(func() { read <- old; <-proceed })
				return decrement(old)
			})
			done <- err
		}()
		return done
	}
	for _, bFirst := range []bool{false, true} {
		if err := resource.HSet(ctx, "stock", "value", "1000", "fence", "0").Err(); err != nil {
			t.Fatal(err)
		}
		readA, readB := make(chan string), make(chan string)
		goA, goB := make(chan struct{}), make(chan struct{})
		doneA := update(a, readA, goA) // A reads, then is paused
		if old := <-readA; old != "1000" {
			t.Fatalf("A read %s", old)
		}
		doneB := update(b, readB, goB) // B reads, then is slow
		if old := <-readB; old != "1000" {
			t.Fatalf("B read %s", old)
		}
		first, second := goA, goB
		firstDone, secondDone := doneA, doneB
		if bFirst {
			first, second, firstDone, secondDone = goB, goA, doneB, doneA
		}
		close(first)
		errFirst := <-firstDone
		close(second)
		errSecond := <-secondDone
		v, _, err := fenced.Read(ctx, resource, "stock")
		if err != nil {
			t.Fatal(err)
		}
		if !bFirst {
			if errFirst != nil || errSecond != nil || v != "998" {
				t.Errorf("A then B: A %v, B %v, stock %s; want both applied, 998", errFirst, errSecond, v)
			}
			continue
		}
		if errFirst != nil || !errors.Is(errSecond, fenced.ErrStale) || v != "999" {
			t.Errorf("B then A: B %v, A %v, stock %s; want B applied, A refused as stale, 999", errFirst, errSecond, v)
		}
	}
}

// TestUpdateCountsEverySuccess: 12 goroutines decrement one counter at once, with
// tokens 1 to 6 (two goroutines per token, as two workers of one holder would). Every
// Update that returns nil took exactly one unit: the counter ends at 1000 minus the
// successes, whatever the interleaving; every other Update was refused as stale.
func TestUpdateCountsEverySuccess(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	if err := rdb.HSet(ctx, "stock", "value", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		successes int
		errs      []error
	)
	start := make(chan struct{})
	for g := range 12 {
		token := uint64(g/2 + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 20 {
				_, err := fenced.Update(ctx, rdb, "stock", token, decrement)
				mu.Lock()
				switch {
				case err == nil:
					successes++
				case !errors.Is(err, fenced.ErrStale):
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	v, tok, err := fenced.Read(ctx, rdb, "stock")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(1000 - successes); v != want {
		t.Errorf("stock %s after %d successful updates, want %s", v, successes, want)
	}
	if tok != 6 || successes < 20 {
		t.Errorf("stored token %d after %d successes; want 6 and at least the 20 updates of one token-6 worker", tok, successes)
	}
	t.Logf("%d successful updates", successes)
}
