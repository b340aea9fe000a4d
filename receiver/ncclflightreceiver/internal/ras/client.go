// Package ras queries NCCL's RAS service (NCCL >= 2.28.7 for JSON output) for the job-wide state of every
// communicator and turns missing, failed and lagging ranks into findings.
//
// Protocol, as NCCL's own client (src/ras/client.cc, `ncclras`) and server (src/ras/client_support.cc) speak it:
// line-based text over TCP, every command ends with "\n".
//
//	-> CLIENT PROTOCOL 2      <- SERVER PROTOCOL 2
//	-> TIMEOUT <secs>         <- OK        (how long RAS waits for each leg of its job-wide gather)
//	-> SET FORMAT json        <- OK        (older NCCL answers "ERROR: ...")
//	-> STATUS                 <- one JSON document, then the server closes the connection
//
// The client reads the STATUS reply with a json.Decoder and stops at the end of the first document, so it
// works whether or not the server closes. Every call uses its own connection and one deadline that covers
// dial, every write and every read.
package ras

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
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

const (
	// DefaultEndpoint is where NCCL RAS listens unless NCCL_RAS_ADDR says otherwise.
	DefaultEndpoint = "localhost:28028"
	// DefaultTimeout leaves room for RAS's own worst case: a 5 s leg timeout plus 5 s extra when a peer is slow.
	DefaultTimeout = 15 * time.Second

	// clientProtocol is NCCL_RAS_CLIENT_PROTOCOL of the NCCL versions this client was written against.
	clientProtocol = 2
	// rasExtraTimeout is RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC: RAS may take this long beyond the TIMEOUT we set.
	rasExtraTimeout = 5 * time.Second
	// rasDefaultLegTimeout is RAS_COLLECTIVE_LEG_TIMEOUT_SEC; we never ask RAS to wait longer than its default.
	rasDefaultLegTimeout = 5 * time.Second
	// maxLineBytes bounds a one-line reply (OK, ERROR ..., SERVER PROTOCOL n).
	maxLineBytes = 4096
	// defaultMaxReplyBytes bounds the STATUS document: about 700 bytes per rank, so this allows ~300k ranks.
	defaultMaxReplyBytes = 256 << 20
)

// Client queries one NCCL RAS endpoint. It holds no connection between calls and is safe for concurrent use.
type Client struct {
	endpoint      string
	timeout       time.Duration
	logger        *zap.Logger
	maxReplyBytes int64
	// warnedProtocol makes the protocol-version warning appear once per Client, not once per poll.
	warnedProtocol atomic.Bool
}

// New returns a client for endpoint (host:port; empty means DefaultEndpoint). timeout bounds each Status call
// from dial to the last byte (<= 0 means DefaultTimeout); keep it above 11 s so RAS can finish its own
// gather when a peer is down. A nil logger logs nothing.
func New(endpoint string, timeout time.Duration, logger *zap.Logger) *Client {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Client{endpoint: endpoint, timeout: timeout, logger: logger, maxReplyBytes: defaultMaxReplyBytes}
}

// Status opens a connection, asks for the JSON status and returns it parsed. It returns within the client's
// timeout (or ctx's deadline, if sooner) and as soon as ctx is cancelled.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.wrap("before connecting", err)
	}
	start := time.Now()
	deadline := start.Add(c.timeout)
	ctxBound := false // the context's deadline, not our timeout, limits the call
	if ctxDeadline, ok := ctx.Deadline(); ok && ctxDeadline.Before(deadline) {
		deadline = ctxDeadline
		ctxBound = true
	}

	dialer := net.Dialer{Deadline: deadline}
	conn, err := dialer.DialContext(ctx, "tcp", c.endpoint)
	if err != nil {
		return nil, c.wrap("connecting (is NCCL RAS enabled and the job running on this node?)", err)
	}
	defer conn.Close()
	if err = conn.SetDeadline(deadline); err != nil {
		return nil, c.wrap("setting the deadline", err)
	}
	// Cancelling ctx moves the deadline to the past, which unblocks any read or write at once.
	stopCancelWatch := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stopCancelWatch()

	st, err := c.exchange(conn, time.Until(deadline))
	if err != nil {
		// After a cancellation the I/O error only reflects the deadline we forced; report the cause.
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, c.wrap("stopped by the context", ctxErr)
		}
		// The connection's deadline can fire a moment before the context's
		// timer when both are the same instant.
		if ctxBound && isTimeout(err) {
			return nil, c.wrap("stopped by the context", context.DeadlineExceeded)
		}
		return nil, err
	}
	c.logger.Debug("NCCL RAS status received",
		zap.String("endpoint", c.endpoint),
		zap.String("nccl_version", st.NCCLVersion),
		zap.Int("communicators", len(st.Communicators)),
		zap.Duration("elapsed", time.Since(start)))
	return st, nil
}

// exchange runs the command sequence on an open connection whose deadline is already set.
func (c *Client) exchange(conn net.Conn, remaining time.Duration) (*Status, error) {
	reader := bufio.NewReaderSize(conn, maxLineBytes)

	reply, err := c.command(conn, reader, "CLIENT PROTOCOL "+strconv.Itoa(clientProtocol))
	if err != nil {
		return nil, err
	}
	const serverPrefix = "SERVER PROTOCOL "
	if len(reply) < len(serverPrefix) || !strings.EqualFold(reply[:len(serverPrefix)], serverPrefix) {
		return nil, c.wrap("handshake", fmt.Errorf("unexpected reply %s (is this an NCCL RAS endpoint?)", quote(reply)))
	}
	// Like ncclras, a different protocol version is worth a warning, not a failure.
	if version := strings.TrimSpace(reply[len(serverPrefix):]); version != strconv.Itoa(clientProtocol) &&
		c.warnedProtocol.CompareAndSwap(false, true) {
		c.logger.Warn("NCCL RAS speaks a different client protocol version; continuing",
			zap.String("endpoint", c.endpoint), zap.String("server_protocol", version),
			zap.Int("client_protocol", clientProtocol))
	}

	timeoutCmd := "TIMEOUT " + strconv.Itoa(rasTimeoutSeconds(remaining))
	if err = c.expectOK(conn, reader, timeoutCmd, ""); err != nil {
		return nil, err
	}
	if err = c.expectOK(conn, reader, "SET FORMAT json", " (JSON output needs NCCL >= 2.28.7)"); err != nil {
		return nil, err
	}

	if err = c.send(conn, "STATUS"); err != nil {
		return nil, err
	}
	limited := &io.LimitedReader{R: reader, N: c.maxReplyBytes}
	st, err := decodeStatus(limited)
	switch {
	case err == nil:
		return st, nil
	case limited.N <= 0:
		return nil, c.wrap("reading the reply to STATUS", fmt.Errorf("reply exceeds %d bytes", c.maxReplyBytes))
	case isTimeout(err):
		return nil, c.wrap("reading the reply to STATUS", fmt.Errorf("no complete reply within the %s timeout: %w", c.timeout, err))
	default:
		return nil, c.wrap("reading the reply to STATUS", err)
	}
}

// rasTimeoutSeconds picks the TIMEOUT for RAS's gather so that RAS answers before our own deadline:
// RAS may take TIMEOUT + 5 s, and we keep one second for the transfer. Never above RAS's default.
func rasTimeoutSeconds(remaining time.Duration) int {
	budget := remaining - rasExtraTimeout - time.Second
	return int(max(time.Second, min(budget, rasDefaultLegTimeout)) / time.Second)
}

// expectOK sends cmd and requires "OK"; hint is appended to the error when the server refuses.
func (c *Client) expectOK(conn net.Conn, reader *bufio.Reader, cmd, hint string) error {
	reply, err := c.command(conn, reader, cmd)
	if err != nil {
		return err
	}
	if !strings.EqualFold(reply, "OK") {
		return c.wrap(cmd, fmt.Errorf("server answered %s%s", quote(reply), hint))
	}
	return nil
}

// command sends one line and returns the one-line reply without its line ending.
func (c *Client) command(conn net.Conn, reader *bufio.Reader, cmd string) (string, error) {
	if err := c.send(conn, cmd); err != nil {
		return "", err
	}
	line, err := reader.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", c.wrap("reading the reply to "+cmd, fmt.Errorf("reply line longer than %d bytes", maxLineBytes))
	case errors.Is(err, io.EOF):
		return "", c.wrap("reading the reply to "+cmd,
			fmt.Errorf("server closed the connection after %d bytes of reply: %w", len(line), io.ErrUnexpectedEOF))
	case err != nil:
		return "", c.wrap("reading the reply to "+cmd, c.explainTimeout(err))
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

func (c *Client) send(conn net.Conn, cmd string) error {
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return c.wrap("sending "+cmd, c.explainTimeout(err))
	}
	return nil
}

func (c *Client) explainTimeout(err error) error {
	if isTimeout(err) {
		return fmt.Errorf("no answer within the %s timeout: %w", c.timeout, err)
	}
	return err
}

func (c *Client) wrap(step string, err error) error {
	return fmt.Errorf("ncclflightreceiver: ras %s: %s: %w", c.endpoint, step, err)
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// quote shows a server reply in an error, shortened so a garbage stream does not flood the log.
func quote(reply string) string {
	const maxShown = 120
	if len(reply) > maxShown {
		return strconv.Quote(reply[:maxShown]) + "..."
	}
	return strconv.Quote(reply)
}
