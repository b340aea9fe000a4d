// Command kfakebroker runs an in-memory Kafka-protocol broker (franz-go's
// kfake) on loopback for the end-to-end tests and the local demo. Apache Kafka
// itself is not needed: kfake speaks the wire protocol the collector's kafka
// receiver and exporter (franz-go) and kcat (librdkafka) use.
//
// With -advertise the broker tells clients to reach it at another address,
// so that a TCP proxy placed there sits between every client and the broker
// and can be stopped to simulate an outage without wiping topics or offsets.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	advertise := flag.String("advertise", "", "address announced to clients in metadata (default: the listen address)")
	topics := flag.String("topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "comma-separated topics to create at start")
	partitions := flag.Int("partitions", 3, "partitions per topic")
	maxMessageBytes := flag.Int("max-message-bytes", 1048588, "broker message.max.bytes (Kafka's default)")
	readyFile := flag.String("ready-file", "", "write the listen address here once the broker accepts connections")
	flag.Parse()

	if err := run(*listen, *advertise, splitList(*topics), *partitions, *maxMessageBytes, *readyFile); err != nil {
		log.Fatalf("kfakebroker: %v", err)
	}
}

func run(listen, advertise string, topics []string, partitions, maxMessageBytes int, readyFile string) error {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("-listen %q: port: %w", listen, err)
	}
	if partitions < 1 {
		return fmt.Errorf("-partitions %d: must be at least 1", partitions)
	}

	var listening net.Addr // the real address, whatever clients are told
	listenFn := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			listening = ln.Addr()
		}
		if err != nil || advertise == "" {
			return ln, err
		}
		adv, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("-advertise %q: %w", advertise, err)
		}
		return advertisedListener{Listener: ln, addr: adv}, nil
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listenFn),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(maxMessageBytes)}),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(partitions), topics...))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer cluster.Close()

	// With -advertise, ListenAddrs reports the advertised address.
	addrs := strings.Join(cluster.ListenAddrs(), ",")
	log.Printf("kfakebroker: listening on %s, clients told %s, topics %v x %d partitions",
		listening, addrs, topics, partitions)
	if readyFile != "" {
		if err := os.WriteFile(readyFile, []byte(addrs), 0o600); err != nil {
			return fmt.Errorf("-ready-file: %w", err)
		}
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}

// advertisedListener reports another address than the one it listens on;
// kfake puts Addr() into its metadata responses.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
