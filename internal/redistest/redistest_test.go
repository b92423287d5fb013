package redistest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStartN(t *testing.T) {
	servers := StartN(t, 3, Options{})
	if len(servers) != 3 {
		t.Fatalf("StartN returned %d servers, want 3", len(servers))
	}

	addrs := Addrs(servers)
	seen := map[string]bool{}
	for i, s := range servers {
		want := fmt.Sprintf("127.0.0.1:%d", s.Port())
		if s.Addr() != want || addrs[i] != want {
			t.Errorf("server %d: Addr() = %q, Addrs()[%d] = %q, want %q", i, s.Addr(), i, addrs[i], want)
		}
		if seen[want] {
			t.Errorf("server %d: address %s used twice", i, want)
		}
		seen[want] = true
		if s.PID() <= 0 {
			t.Errorf("server %d: PID() = %d, want > 0", i, s.PID())
		}
	}

	ctx := ctxTimeout(t, 5*time.Second)
	for i, s := range servers {
		if got, err := s.Client().Ping(ctx).Result(); err != nil || got != "PONG" {
			t.Errorf("server %d: Client().Ping = %q, %v; want PONG", i, got, err)
		}
	}

	clients := Clients(servers)
	if len(clients) != len(servers) {
		t.Fatalf("Clients returned %d clients, want %d", len(clients), len(servers))
	}
	for i, c := range clients {
		// Tag each server through its own client and read the tag back
		// through the server's address to check the order.
		if err := c.Set(ctx, "id", i, 0).Err(); err != nil {
			t.Fatalf("client %d: SET: %v", i, err)
		}
	}
	for i, s := range servers {
		if got, err := s.Client().Get(ctx, "id").Int(); err != nil || got != i {
			t.Errorf("server %d: GET id = %d, %v; want %d", i, got, err, i)
		}
	}
}

func TestRestartWithoutPersistenceLosesData(t *testing.T) {
	s := Start(t, Options{})
	c := s.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	port, pid := s.Port(), s.PID()

	s.Restart()

	if s.Port() != port {
		t.Errorf("Port() after Restart = %d, want %d", s.Port(), port)
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Errorf("PID() after Restart = %d, want a new non-zero PID (old %d)", s.PID(), pid)
	}
	if got, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after Restart = %q, %v; want redis.Nil", got, err)
	}
}

func TestRestartWithPersistenceKeepsData(t *testing.T) {
	s := Start(t, Options{Persistent: true})
	c := s.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Restart()

	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET k after Restart = %q, %v; want \"v\"", got, err)
	}
}

func TestArgs(t *testing.T) {
	s := Start(t, Options{Args: []string{"--maxmemory", "12345678"}})
	ctx := ctxTimeout(t, 5*time.Second)
	got, err := s.Client().ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Errorf("CONFIG GET maxmemory = %v, %v; want 12345678", got, err)
	}
}
