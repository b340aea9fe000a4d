// Package freeport finds loopback addresses for child processes (collectors,
// brokers, sinks started by tests and harnesses) to listen on.
package freeport // import "github.com/otelcol-gpu/otelcol-gpu/test/freeport"

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// span is how many ports below the ephemeral range are tried.
const span = 10000

var (
	mu     sync.Mutex
	handed = map[int]bool{} // ports this process handed out, not handed again
)

// Addr returns a loopback address nobody listens on now, for a child to
// bind. Its port lies below the kernel's ephemeral range: a port from
// "127.0.0.1:0" comes from that range, where an outgoing connection (a
// Kafka client's, an HTTP request's) can take it between this check and
// the child's bind ("address already in use").
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if low := ephemeralLow(); low > 1024+span {
		for range 200 {
			port := low - span + rand.IntN(span)
			if handed[port] {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // taken
			}
			_ = ln.Close()
			handed[port] = true
			return ln.Addr().String(), nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("freeport: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// else the usual 32768.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return n
}
