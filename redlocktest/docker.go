package redlocktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisproc"
)

const (
	// DockerImageEnv names the environment variable that chooses the image of the
	// Docker backend, as "repository:tag". The default is DefaultDockerImage.
	DockerImageEnv = "REDLOCKTEST_DOCKER_IMAGE"

	// DefaultDockerImage is the image docker/build-image.sh builds from the host's
	// redis-server binary. It is never pulled: an image that is not there locally
	// counts as a missing engine.
	DefaultDockerImage = "local/redis:7"

	// DockerRequireEnv names the environment variable that makes a missing engine or
	// image fail the test instead of skipping it, when it is "1". `make test-docker`
	// sets it.
	DockerRequireEnv = "REDLOCKTEST_DOCKER"

	dockerPingTimeout = 2 * time.Second
)

// Docker is the Docker backend: each node is a container of a local Redis image,
// started through github.com/ory/dockertest/v3 on the host's network (so a node's
// address is 127.0.0.1:PORT, as for processes), with its data directory bind-mounted
// from t.TempDir. Its Start returns a *Container.
//
// The engine is the one DOCKER_HOST names (or the default socket). No image is pulled:
// build it with docker/build-image.sh.
type Docker struct {
	pool      *dockertest.Pool
	repo, tag string
}

// NewDocker connects to the Docker engine and checks that the image is there. When no
// engine answers, or the image is missing, it skips the test with a message saying
// how to get them, or fails it when DockerRequireEnv is "1".
func NewDocker(t T) *Docker {
	t.Helper()
	image := os.Getenv(DockerImageEnv)
	if image == "" {
		image = DefaultDockerImage
	}
	repo, tag, ok := strings.Cut(image, ":")
	if !ok {
		tag = "latest"
	}
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(DockerRequireEnv) == "1" {
			t.Fatalf("redlocktest: %s (%s=1)", msg, DockerRequireEnv)
		}
		t.Skipf("redlocktest: skipping the Docker backend: %s; `make test-docker` starts a private engine, builds the image and runs these tests", msg)
	}

	pool, err := dockertest.NewPool("")
	if err != nil {
		unavailable("no Docker client: %v", err)
	}
	// The client keeps idle HTTP connections (and their goroutines) to the engine.
	t.Cleanup(pool.Client.HTTPClient.CloseIdleConnections)
	pool.Client.SetTimeout(dockerPingTimeout)
	if err := pool.Client.Ping(); err != nil {
		unavailable("no Docker engine answers at %s: %v", dockerHost(), err)
	}
	pool.Client.SetTimeout(0)
	if _, err := pool.Client.InspectImage(image); err != nil {
		unavailable("the engine at %s has no image %s (%v); build it with docker/build-image.sh", dockerHost(), image, err)
	}
	return &Docker{pool: pool, repo: repo, tag: tag}
}

// dockerHost names the engine's address for messages.
func dockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "the default socket (DOCKER_HOST is not set)"
}

// Start starts one container on a free port of the host's loopback and returns a
// *Container once it answers PING. The container is removed when the test ends.
// Options.Clock and Options.Cluster are not supported and fail the test.
func (d *Docker) Start(t T, opts Options) Node {
	t.Helper()
	if opts.Clock != nil || opts.Cluster {
		t.Fatalf("redlocktest: the Docker backend supports neither Options.Clock nor Options.Cluster; use the process backend")
	}
	c := &Container{
		t:           t,
		d:           d,
		dir:         t.TempDir(),
		args:        append([]string(nil), opts.Args...),
		persistence: opts.Persistence,
	}
	t.Cleanup(c.cleanup)
	c.mu.Lock()
	defer c.mu.Unlock()
	err := redisproc.RetryPorts(context.Background(), t.Logf, "a Redis container", func() error {
		if err := c.removeLocked(); err != nil {
			return err
		}
		port, err := pickPort()
		if err != nil {
			return err
		}
		c.port = port
		return c.createLocked()
	})
	if err != nil {
		t.Fatalf("redlocktest: %v", err)
	}
	return c
}

// Container is a Redis server in a Docker container owned by a test. It implements
// Node with docker kill, pause, unpause and start.
type Container struct {
	t    T
	d    *Docker
	dir  string // bind-mounted at /data
	args []string

	mu          sync.Mutex
	port        int
	persistence Persistence // of the container's command line
	res         *dockertest.Resource
	running     bool
	paused      bool
}

// Addr returns the container's address, "127.0.0.1:PORT" on the host's network.
func (c *Container) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return redisproc.Loopback(c.port)
}

// ID returns the container's ID, or "" when there is none.
func (c *Container) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res == nil {
		return ""
	}
	return c.res.Container.ID
}

// Client returns a new go-redis client with default options connected to Addr. It is
// closed when the test ends.
func (c *Container) Client() *redis.Client { return newClient(c.t, c.Addr()) }

// Kill ends the server with docker kill (SIGKILL) and waits until the container has
// stopped. It does nothing when the container is stopped.
func (c *Container) Kill() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.killLocked(); err != nil {
		c.t.Fatalf("redlocktest: %v", err)
	}
}

// Pause freezes the container with docker pause. Pausing a stopped container fails the
// test; pausing a paused one does nothing.
func (c *Container) Pause() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		c.t.Fatalf("redlocktest: Pause on %s: container is not running", redisproc.Loopback(c.port))
	}
	if c.paused {
		return
	}
	if err := c.d.pool.Client.PauseContainer(c.res.Container.ID); err != nil {
		c.t.Fatalf("redlocktest: docker pause on %s: %v", redisproc.Loopback(c.port), err)
	}
	c.paused = true
}

// Resume continues a container frozen by Pause with docker unpause. It does nothing
// otherwise.
func (c *Container) Resume() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running || !c.paused {
		return
	}
	if err := c.d.pool.Client.UnpauseContainer(c.res.Container.ID); err != nil {
		c.t.Fatalf("redlocktest: docker unpause on %s: %v", redisproc.Loopback(c.port), err)
	}
	c.paused = false
}

// Restart kills the container if it runs and starts it again with persistence p, on
// the same port and data directory: with the same persistence the same container is
// started again (docker restart with no grace period); with another one it is
// replaced by a new container with the new command line.
func (c *Container) Restart(p Persistence) {
	c.t.Helper()
	c.RestartAfter(0, p)
}

// RestartAfter kills the container if it runs, keeps the port closed for down, then
// restarts it as Restart does. It blocks for the whole time.
func (c *Container) RestartAfter(down time.Duration, p Persistence) {
	c.t.Helper()
	c.Kill()
	// Sleep unlocked, so that Addr and ID answer meanwhile.
	time.Sleep(down)
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if p == c.persistence && c.res != nil {
		err = c.startLocked()
	} else {
		c.persistence = p
		if err = c.removeLocked(); err == nil {
			err = c.createLocked()
		}
	}
	if err != nil {
		c.t.Fatalf("redlocktest: restarting the container on %s: %v", redisproc.Loopback(c.port), err)
	}
}

// cmd returns the container's command line.
func (c *Container) cmd() []string {
	args := []string{
		"redis-server",
		"--port", strconv.Itoa(c.port),
		"--bind", "127.0.0.1",
		"--dir", "/data",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
	}
	args = append(args, c.persistence.args()...)
	return append(args, c.args...)
}

// createLocked creates and starts a new container and waits until it is ready.
func (c *Container) createLocked() error {
	res, err := c.d.pool.RunWithOptions(&dockertest.RunOptions{
		Repository: c.d.repo,
		Tag:        c.d.tag,
		Cmd:        c.cmd(),
		Mounts:     []string{c.dir + ":/data"},
		// The container writes the bind-mounted directory as the test's own user,
		// so t.TempDir can remove what it wrote.
		User:   fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		Labels: map[string]string{"redlocktest": "1"},
	}, func(hc *dc.HostConfig) {
		// dockertest has no option for it: share the host's network, so the node
		// listens on the host's loopback like a process node.
		hc.NetworkMode = "host"
		hc.PublishAllPorts = false
	})
	if res != nil {
		c.res = res
	}
	if err != nil {
		return err
	}
	c.running = true
	return c.waitLocked()
}

// startLocked starts the stopped container again and waits until it is ready.
func (c *Container) startLocked() error {
	if err := c.d.pool.Client.StartContainer(c.res.Container.ID, nil); err != nil {
		return err
	}
	c.running = true
	return c.waitLocked()
}

// waitLocked waits until the container's server answers PING; if it stops first, or
// never answers, it is killed and the error carries the end of its output.
func (c *Container) waitLocked() error {
	id := c.res.Container.ID
	exited := func() bool {
		info, err := c.d.pool.Client.InspectContainer(id)
		return err != nil || !info.State.Running
	}
	// No process ID check: inside the container the server has its own PID
	// namespace. A port taken by another server is caught by the container exiting.
	err := redisproc.WaitReady(context.Background(), redisproc.Loopback(c.port), 0, exited)
	if err == nil {
		return nil
	}
	var out bytes.Buffer
	_ = c.d.pool.Client.Logs(dc.LogsOptions{
		Container: id, OutputStream: &out, ErrorStream: &out, Stdout: true, Stderr: true, Tail: "40",
	})
	_ = c.killLocked()
	return &redisproc.StartError{Err: err, Port: c.port, LogName: "container " + id[:12], LogTail: redisproc.TailText(out.String())}
}

// killLocked kills the container if it runs and waits until it has stopped.
func (c *Container) killLocked() error {
	if !c.running {
		return nil
	}
	id := c.res.Container.ID
	c.running, c.paused = false, false
	err := c.d.pool.Client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGKILL})
	var notRunning *dc.ContainerNotRunning
	if err != nil && !errors.As(err, &notRunning) {
		return fmt.Errorf("docker kill %s on %s: %v", id[:12], redisproc.Loopback(c.port), err)
	}
	if _, err := c.d.pool.Client.WaitContainer(id); err != nil {
		return fmt.Errorf("waiting for container %s on %s to stop: %v", id[:12], redisproc.Loopback(c.port), err)
	}
	return nil
}

// removeLocked removes the container, if any.
func (c *Container) removeLocked() error {
	if c.res == nil {
		return nil
	}
	res := c.res
	c.res, c.running, c.paused = nil, false, false
	if err := c.d.pool.Purge(res); err != nil {
		return fmt.Errorf("removing container %s: %v", res.Container.ID[:12], err)
	}
	return nil
}

// cleanup is registered with t.Cleanup by Start.
func (c *Container) cleanup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.removeLocked(); err != nil {
		c.t.Errorf("redlocktest: cleanup: %v", err)
	}
}
