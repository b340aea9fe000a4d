package ras

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fakeRAS listens on loopback and hands every accepted connection, one after the other, to handle.
// It returns the address; cleanup closes the listener and waits for the handler, so nothing leaks.
func fakeRAS(t *testing.T, handle func(conn net.Conn, reader *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			handle(conn, bufio.NewReader(conn))
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// rasServer plays NCCL's server side (src/ras/client_support.cc) for the protocol lines and answers STATUS
// with statusReply. Every command line it receives goes to commands. With keepOpen it waits for the client
// to hang up instead of closing after the reply.
type rasServer struct {
	serverProtocol string
	setFormatReply string
	statusReply    []byte
	keepOpen       bool
	commands       chan string
}

func newRASServer(statusReply []byte) *rasServer {
	return &rasServer{serverProtocol: "2", setFormatReply: "OK", statusReply: statusReply, commands: make(chan string, 64)}
}

func (s *rasServer) handle(conn net.Conn, reader *bufio.Reader) {
	for {
		line, err := reader.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.TrimRight(line, "\r\n")
		s.commands <- cmd
		lower := strings.ToLower(cmd)
		switch {
		case strings.HasPrefix(lower, "client protocol "):
			_, _ = io.WriteString(conn, "SERVER PROTOCOL "+s.serverProtocol+"\n")
		case strings.HasPrefix(lower, "timeout "):
			_, _ = io.WriteString(conn, "OK\n")
		case strings.HasPrefix(lower, "set format "):
			_, _ = io.WriteString(conn, s.setFormatReply+"\n")
		case lower == "status":
			_, _ = conn.Write(s.statusReply)
			if s.keepOpen {
				_, _ = io.Copy(io.Discard, reader)
			}
			return
		default:
			_, _ = io.WriteString(conn, "ERROR: Unknown command "+cmd+"\n")
		}
	}
}

func (s *rasServer) received() []string {
	var got []string
	for {
		select {
		case cmd := <-s.commands:
			got = append(got, cmd)
		default:
			return got
		}
	}
}

func TestStatusFromFakeServer(t *testing.T) {
	server := newRASServer(readFixture(t))
	addr := fakeRAS(t, server.handle)

	st, err := New(addr, 15*time.Second, zap.NewNop()).Status(context.Background())
	require.NoError(t, err)

	assert.Equal(t, []string{"CLIENT PROTOCOL 2", "TIMEOUT 5", "SET FORMAT json", "STATUS"}, server.received())
	assert.Equal(t, "2.29.1", st.NCCLVersion)
	require.Len(t, st.Communicators, 1)
	require.Len(t, st.Communicators[0].MissingRanks, 1)
	missing := st.Communicators[0].MissingRanks[0]
	assert.Equal(t, 1, missing.Rank)
	assert.Equal(t, "172.16.64.245", missing.Host)
	assert.Equal(t, 1524345, missing.PID)
	assert.True(t, missing.Status.Unresponsive)

	findings := Findings(st, "job-7")
	require.Len(t, findings, 1)
	assert.Equal(t, KindMissingRanks, findings[0].Kind)
	assert.Contains(t, findings[0].Message, "rank 1 (host 172.16.64.245, pid 1524345, GPU 1) is unresponsive")
}

// The client stops at the end of the document; it does not need the server to close.
func TestStatusServerKeepsConnectionOpen(t *testing.T) {
	server := newRASServer(readFixture(t))
	server.keepOpen = true
	addr := fakeRAS(t, server.handle)

	start := time.Now()
	st, err := New(addr, 10*time.Second, nil).Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "0xae94423cfbb2ef4a", st.Communicators[0].Hash)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestStatusTimesOutWithoutHanging(t *testing.T) {
	fixture := readFixture(t)
	tests := []struct {
		name    string
		handle  func(conn net.Conn, reader *bufio.Reader)
		wantMsg string
	}{
		{
			name:    "never replies",
			handle:  func(_ net.Conn, reader *bufio.Reader) { _, _ = io.Copy(io.Discard, reader) },
			wantMsg: "reading the reply to CLIENT PROTOCOL 2: no answer within the 300ms timeout",
		},
		{
			name: "stalls in the middle of the JSON",
			handle: func(conn net.Conn, reader *bufio.Reader) {
				server := newRASServer(fixture[:len(fixture)/2])
				server.keepOpen = true
				server.handle(conn, reader)
			},
			wantMsg: "no complete reply within the 300ms timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeRAS(t, tt.handle)
			start := time.Now()
			st, err := New(addr, 300*time.Millisecond, nil).Status(context.Background())
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Nil(t, st)
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
			assert.Contains(t, err.Error(), "ncclflightreceiver: ras "+addr)
			assert.Contains(t, err.Error(), tt.wantMsg)
			assert.GreaterOrEqual(t, elapsed, 250*time.Millisecond)
			assert.Less(t, elapsed, 3*time.Second)
		})
	}
}

func TestStatusBadServers(t *testing.T) {
	fixture := readFixture(t)
	tests := []struct {
		name    string
		server  func() *rasServer
		handle  func(conn net.Conn, reader *bufio.Reader) // overrides server when set
		wantMsg string
		wantIs  error
	}{
		{
			name: "closes at once",
			// Read the command first: closing with it unread would make the
			// kernel answer with a reset instead of an end of stream.
			handle:  func(_ net.Conn, r *bufio.Reader) { _, _ = r.ReadString('\n') },
			wantMsg: "reading the reply to CLIENT PROTOCOL 2: server closed the connection after 0 bytes of reply",
			wantIs:  io.ErrUnexpectedEOF,
		},
		{
			name: "not RAS",
			handle: func(conn net.Conn, reader *bufio.Reader) {
				_, _ = reader.ReadString('\n')
				_, _ = io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\n")
			},
			wantMsg: `handshake: unexpected reply "HTTP/1.1 400 Bad Request" (is this an NCCL RAS endpoint?)`,
		},
		{
			name: "endless line",
			handle: func(conn net.Conn, reader *bufio.Reader) {
				_, _ = reader.ReadString('\n')
				_, _ = conn.Write([]byte(strings.Repeat("x", 2*maxLineBytes)))
			},
			wantMsg: "reply line longer than 4096 bytes",
		},
		{
			name: "no JSON support",
			server: func() *rasServer {
				s := newRASServer(fixture)
				s.setFormatReply = "ERROR: Unknown command SET FORMAT json"
				return s
			},
			wantMsg: `SET FORMAT json: server answered "ERROR: Unknown command SET FORMAT json" (JSON output needs NCCL >= 2.28.7)`,
		},
		{
			name:    "text instead of JSON",
			server:  func() *rasServer { return newRASServer([]byte("NCCL version 2.29.1 compiled with CUDA 13.0\n")) },
			wantMsg: "reading the reply to STATUS: decoding JSON",
		},
		{
			name:    "partial JSON then close",
			server:  func() *rasServer { return newRASServer(fixture[:300]) },
			wantMsg: "reply ended after 300 bytes before the JSON document was complete",
			wantIs:  io.ErrUnexpectedEOF,
		},
		{
			name:    "empty reply to STATUS",
			server:  func() *rasServer { return newRASServer(nil) },
			wantMsg: "no JSON document in the reply (0 bytes)",
			wantIs:  io.ErrUnexpectedEOF,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handle := tt.handle
			if handle == nil {
				handle = tt.server().handle
			}
			addr := fakeRAS(t, handle)
			st, err := New(addr, 5*time.Second, nil).Status(context.Background())
			require.Error(t, err)
			assert.Nil(t, st)
			assert.Contains(t, err.Error(), "ncclflightreceiver: ras")
			assert.Contains(t, err.Error(), tt.wantMsg)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
		})
	}
}

func TestStatusReplyOverCap(t *testing.T) {
	addr := fakeRAS(t, newRASServer(readFixture(t)).handle)
	client := New(addr, 5*time.Second, nil)
	client.maxReplyBytes = 100
	_, err := client.Status(context.Background())
	assert.ErrorContains(t, err, "reading the reply to STATUS: reply exceeds 100 bytes")
}

func TestStatusWarnsOnceAboutProtocolVersion(t *testing.T) {
	server := newRASServer(readFixture(t))
	server.serverProtocol = "3"
	addr := fakeRAS(t, server.handle)
	core, logs := observer.New(zapcore.WarnLevel)
	client := New(addr, 5*time.Second, zap.New(core))

	for range 2 {
		st, err := client.Status(context.Background())
		require.NoError(t, err, "a newer protocol is not fatal")
		assert.Equal(t, "2.29.1", st.NCCLVersion)
	}
	warnings := logs.FilterMessageSnippet("different client protocol").All()
	require.Len(t, warnings, 1)
	assert.Equal(t, "3", warnings[0].ContextMap()["server_protocol"])
}

func TestStatusContextCancelled(t *testing.T) {
	silent := func(_ net.Conn, reader *bufio.Reader) { _, _ = io.Copy(io.Discard, reader) }

	t.Run("while waiting for a reply", func(t *testing.T) {
		addr := fakeRAS(t, silent)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := New(addr, 30*time.Second, nil).Status(ctx)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "stopped by the context")
		assert.Less(t, time.Since(start), 3*time.Second)
	})
	t.Run("already cancelled", func(t *testing.T) {
		server := newRASServer(readFixture(t))
		addr := fakeRAS(t, server.handle)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := New(addr, 5*time.Second, nil).Status(ctx)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, server.received(), "no command is sent")
	})
	t.Run("context deadline sooner than the timeout", func(t *testing.T) {
		addr := fakeRAS(t, silent)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := New(addr, 30*time.Second, nil).Status(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 3*time.Second)
	})
}

func TestStatusConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	_, err = New(addr, 2*time.Second, nil).Status(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ncclflightreceiver: ras "+addr+": connecting (is NCCL RAS enabled")
}

func TestNewDefaults(t *testing.T) {
	client := New("", 0, nil)
	assert.Equal(t, DefaultEndpoint, client.endpoint)
	assert.Equal(t, DefaultTimeout, client.timeout)
	assert.NotNil(t, client.logger)
	assert.EqualValues(t, defaultMaxReplyBytes, client.maxReplyBytes)
}

func TestRASTimeoutSeconds(t *testing.T) {
	assert.Equal(t, 5, rasTimeoutSeconds(DefaultTimeout), "never above RAS's default")
	assert.Equal(t, 5, rasTimeoutSeconds(time.Minute))
	assert.Equal(t, 3, rasTimeoutSeconds(9*time.Second), "RAS answers within 3 s + 5 s extra, 1 s to spare")
	assert.Equal(t, 1, rasTimeoutSeconds(2*time.Second), "at least 1 (0 would disable RAS's timeout)")
}
