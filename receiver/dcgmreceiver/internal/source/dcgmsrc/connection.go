package dcgmsrc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
)

// Mode is how the receiver reaches DCGM.
type Mode string

const (
	// ModeStandalone connects to a running nv-hostengine (the GPU Operator
	// runs one): a second, embedded engine would compete with it.
	ModeStandalone Mode = "standalone"
	// ModeEmbedded starts the host engine inside this process (bare-metal
	// nodes without nv-hostengine).
	ModeEmbedded Mode = "embedded"
)

// DefaultEndpoint is nv-hostengine's default address.
const DefaultEndpoint = "localhost:5555"

// Connection retry: the first attempt after a failure waits
// initialConnectBackoff, doubling up to maxConnectBackoff.
const (
	initialConnectBackoff = time.Second
	maxConnectBackoff     = time.Minute
	// initTimeout bounds how long a caller waits for dcgm.Init (a connect to
	// an unreachable host can take long); Init keeps running and its result
	// is kept when it returns.
	initTimeout = 30 * time.Second
	// cleanupTimeout bounds how long Release waits for the disconnect.
	cleanupTimeout = 5 * time.Second
)

// Connections is the registry of the process's DCGM connection. go-dcgm
// keeps its handle in package state, so a process can hold one DCGM
// connection at a time: every receiver instance with source dcgm shares it.
//
// It is a type and not a package variable so that its lifetime is explicit
// and tests get their own: the receiver factory, created once per process,
// creates one with NewConnections and hands it to every receiver it builds.
// Connections are keyed by mode and endpoint; while one is held, asking for
// a different one fails.
type Connections struct {
	newAPI func() api
	now    func() time.Time

	mu     sync.Mutex
	active *Connection // nil when none is held or closing
	nextID int         // tells apart the DCGM objects of each source
}

// NewConnections returns an empty registry whose connections call go-dcgm.
// Nothing is loaded or connected until a source starts.
func NewConnections() *Connections {
	return newConnections(newDCGMAPI, time.Now)
}

func newConnections(newAPI func() api, now func() time.Time) *Connections {
	return &Connections{newAPI: newAPI, now: now}
}

// connKey identifies a connection: the mode and, for standalone, the
// endpoint.
type connKey struct {
	mode     Mode
	endpoint string
}

func (k connKey) String() string {
	if k.mode == ModeEmbedded {
		return string(ModeEmbedded)
	}
	return string(k.mode) + " " + k.endpoint
}

// parseEndpoint tells a unix socket ("/path" or "unix:///path") from a
// host[:port] address.
func parseEndpoint(endpoint string) (address string, isUnixSocket bool) {
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		return rest, true
	}
	return endpoint, strings.HasPrefix(endpoint, "/")
}

// Acquire returns the shared connection for mode and endpoint, taking a
// reference that the caller gives back with Release. It does not connect.
// The first acquirer's logger is the connection's.
func (cs *Connections) Acquire(mode Mode, endpoint string, logger *zap.Logger) (*Connection, error) {
	switch mode {
	case "", ModeStandalone:
		mode = ModeStandalone
		if endpoint == "" {
			endpoint = DefaultEndpoint
		}
	case ModeEmbedded:
		endpoint = ""
	default:
		return nil, fmt.Errorf("dcgmreceiver: dcgm: unknown mode %q (want %q or %q)", mode, ModeStandalone, ModeEmbedded)
	}
	key := connKey{mode: mode, endpoint: endpoint}

	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.active; c != nil {
		if c.key != key {
			return nil, fmt.Errorf("dcgmreceiver: dcgm: a connection to %s is already in use; go-dcgm holds one connection per process, so every dcgm receiver must use the same mode and endpoint (asked for %s)", c.key, key)
		}
		c.mu.Lock()
		c.refs++
		c.closing = false
		c.mu.Unlock()
		return c, nil
	}
	c := &Connection{
		registry: cs,
		key:      key,
		api:      cs.newAPI(),
		now:      cs.now,
		logger:   logger.With(zap.String("dcgm.connection", key.String())),
		guard:    hang.NewGuard(),
		refs:     1,
	}
	cs.active = c
	return c, nil
}

// newSourceID returns a number unique within the registry, used to name
// the DCGM groups a source creates.
func (cs *Connections) newSourceID() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.nextID++
	return cs.nextID
}

// Connection is one DCGM connection shared by every source. It is the gate
// in front of go-dcgm: it goes disconnected → connected on a successful
// Init and back on a lost connection, and lets a call reach the api only
// while connected, so nothing but Init can reach libdcgm without it.
type Connection struct {
	registry *Connections
	key      connKey
	api      api
	now      func() time.Time
	logger   *zap.Logger
	guard    *hang.Guard // Init and cleanup can block: run them with a deadline

	mu         sync.Mutex
	refs       int
	closing    bool // refs reached 0; cleanup waits for in-flight calls
	connected  bool
	connecting bool
	cleanup    func() // set after a successful Init until it is called
	gen        uint64 // counts successful Inits: objects of an older one are gone
	inflight   int    // calls between do's start and end
	everUp     bool
	lastErr    error
	retryAt    time.Time
	backoff    time.Duration
}

// connect makes sure the connection is up and returns its generation. It is
// cheap while down: between attempts it returns the last error at once.
// The state changes (connected, lost, reconnected) are logged once each.
func (c *Connection) connect(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	switch {
	case c.connected:
		gen := c.gen
		c.mu.Unlock()
		return gen, nil
	case c.closing || c.refs == 0:
		c.mu.Unlock()
		return 0, errors.New("dcgmreceiver: dcgm: connection released")
	case c.connecting:
		c.mu.Unlock()
		return 0, errors.New("dcgmreceiver: dcgm: connecting (an earlier attempt has not finished)")
	case c.now().Before(c.retryAt):
		err := c.lastErr
		c.mu.Unlock()
		return 0, fmt.Errorf("dcgmreceiver: dcgm: connecting to %s (next attempt in %s): %w", c.key, c.retryAt.Sub(c.now()).Round(time.Millisecond), err)
	case c.inflight > 0:
		// Calls of the lost connection are still inside go-dcgm: unloading
		// it under them would crash, so wait for them to return.
		n := c.inflight
		c.mu.Unlock()
		return 0, fmt.Errorf("dcgmreceiver: dcgm: reconnecting to %s: waiting for %d calls of the lost connection to return", c.key, n)
	}
	c.connecting = true
	staleCleanup := c.cleanup
	c.cleanup = nil
	c.mu.Unlock()

	address, isSocket := parseEndpoint(c.key.endpoint)
	// Init runs in the guard's goroutine and records its own result, so a
	// slow Init that returns after the caller gave up still counts.
	err := c.guard.Do(ctx, "init", initTimeout, func() error {
		if staleCleanup != nil {
			// go-dcgm's Init is ref-counted: it reconnects only once the
			// lost connection has been shut down.
			staleCleanup()
		}
		cleanup, err := c.api.Init(c.key.mode, address, isSocket)
		c.initDone(cleanup, err)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dcgmreceiver: dcgm: connecting to %s: %w%s", c.key, err, libraryHint(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected {
		return 0, fmt.Errorf("dcgmreceiver: dcgm: connecting to %s: %w", c.key, errNotConnected)
	}
	return c.gen, nil
}

func (c *Connection) initDone(cleanup func(), err error) {
	c.mu.Lock()
	c.connecting = false
	if err != nil {
		c.lastErr = err
		c.backoff = min(max(2*c.backoff, initialConnectBackoff), maxConnectBackoff)
		c.retryAt = c.now().Add(c.backoff)
		closing := c.closing || c.refs == 0
		c.mu.Unlock()
		if closing {
			c.finishClose(nil)
		}
		return
	}
	if cleanup == nil {
		cleanup = func() {}
	}
	if c.closing || c.refs == 0 {
		// Released while Init was running: undo it.
		c.mu.Unlock()
		c.finishClose(cleanup)
		return
	}
	c.connected, c.cleanup = true, cleanup
	c.gen++
	c.lastErr, c.backoff, c.retryAt = nil, 0, time.Time{}
	first := !c.everUp
	c.everUp = true
	c.mu.Unlock()
	if first {
		c.logger.Info("Connected to DCGM")
	} else {
		c.logger.Info("Reconnected to DCGM")
	}
}

// do runs fn against the api if the connection is up and still the given
// generation; otherwise it returns errNotConnected without calling it. A
// connection-lost error from fn takes the connection down (logged once).
func (c *Connection) do(gen uint64, fn func(api) error) error {
	c.mu.Lock()
	if !c.connected || c.gen != gen {
		c.mu.Unlock()
		return errNotConnected
	}
	c.inflight++
	c.mu.Unlock()

	err := fn(c.api)

	c.mu.Lock()
	c.inflight--
	lost := err != nil && isConnectionLost(err) && c.connected && c.gen == gen
	if lost {
		c.connected = false
	}
	// The last call out after Release finishes the deferred close.
	closeNow := c.closing && c.inflight == 0 && !c.connecting
	var cleanup func()
	if closeNow {
		cleanup, c.cleanup = c.cleanup, nil
	}
	c.mu.Unlock()
	if lost {
		c.logger.Warn("Lost the connection to DCGM; reconnecting", zap.Error(err))
	}
	if closeNow {
		c.finishClose(cleanup)
	}
	return err
}

// generation reports the current generation and whether it is connected.
func (c *Connection) generation() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen, c.connected
}

// Release gives back a reference. The last one disconnects, unless calls
// are still inside go-dcgm: then the last of them disconnects when it
// returns. Release never blocks on a stuck call.
func (c *Connection) Release() {
	c.mu.Lock()
	if c.refs == 0 {
		c.mu.Unlock()
		return
	}
	c.refs--
	if c.refs > 0 {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.connected = false
	if c.inflight > 0 || c.connecting {
		// The last call out (do) or Init's end (initDone) closes.
		c.mu.Unlock()
		return
	}
	cleanup := c.cleanup
	c.cleanup = nil
	c.mu.Unlock()
	c.finishClose(cleanup)
}

// finishClose disconnects (with a deadline) and frees the registry slot.
func (c *Connection) finishClose(cleanup func()) {
	if cleanup != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		err := c.guard.Do(ctx, "cleanup", cleanupTimeout, func() error { cleanup(); return nil })
		cancel()
		if err != nil {
			c.logger.Warn("Disconnecting from DCGM did not finish in time", zap.Error(err))
		}
	}
	cs := c.registry
	cs.mu.Lock()
	c.mu.Lock()
	if cs.active == c && c.refs == 0 {
		cs.active = nil
	}
	c.mu.Unlock()
	cs.mu.Unlock()
}

// libraryHint says how to provide DCGM's client library when go-dcgm could
// not load it: the agent needs libdcgm.so.4 even to talk to a standalone
// nv-hostengine, and the operator reading the warning needs the ways out.
func libraryHint(err error) string {
	if !strings.Contains(err.Error(), "libdcgm") {
		return ""
	}
	return " (provide DCGM's client library: run the agent on NVIDIA's DCGM image, or mount the host's libdcgm.so.4 at" +
		" /usr/local/lib/dcgm, deploy/container/README.md; or read the GPUs without DCGM: GPU_SOURCE=nvml or exporter)"
}
