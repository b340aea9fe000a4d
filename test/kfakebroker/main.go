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
	"crypto/tls"
	"errors"
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

// options are the broker's flags.
type options struct {
	listen, advertise string
	topics            []string
	partitions        int
	maxMessageBytes   int
	readyFile         string
	controlListen     string
	// SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and TLS, both off by default.
	saslMechanism, saslUser, saslPassword string
	tlsCert, tlsKey                       string
}

func main() {
	var o options
	var topics string
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on")
	flag.StringVar(&o.advertise, "advertise", "", "address announced to clients in metadata (default: the listen address)")
	flag.StringVar(&topics, "topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "comma-separated topics to create at start")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions per topic")
	flag.IntVar(&o.maxMessageBytes, "max-message-bytes", 1048588, "broker message.max.bytes (Kafka's default)")
	flag.StringVar(&o.controlListen, "control-listen", "", "serve the HTTP control endpoint (PUT/DELETE/GET /topics/{topic}/unwritable) here")
	flag.StringVar(&o.readyFile, "ready-file", "", "write the listen address here once the broker accepts connections")
	flag.StringVar(&o.saslUser, "sasl-user", "", "require SASL: the one user clients must authenticate as")
	flag.StringVar(&o.saslPassword, "sasl-password", "", "that user's password")
	flag.StringVar(&o.saslMechanism, "sasl-mechanism", "SCRAM-SHA-512", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	flag.StringVar(&o.tlsCert, "tls-cert", "", "serve TLS with this PEM certificate (needs -tls-key)")
	flag.StringVar(&o.tlsKey, "tls-key", "", "the certificate's PEM private key")
	flag.Parse()
	o.topics = splitList(topics)

	if err := run(o); err != nil {
		log.Fatalf("kfakebroker: %v", err)
	}
}

// securityOpts turns the SASL and TLS flags into kfake options.
func securityOpts(o options) ([]kfake.Opt, error) {
	var opts []kfake.Opt
	if o.saslUser != "" {
		switch o.saslMechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return nil, fmt.Errorf("-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", o.saslMechanism)
		}
		if o.saslPassword == "" {
			return nil, errors.New("-sasl-user needs -sasl-password")
		}
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(o.saslMechanism, o.saslUser, o.saslPassword))
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert %q, -tls-key %q: %w", o.tlsCert, o.tlsKey, err)
		}
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}

func run(o options) error {
	listen, advertise, topics, partitions := o.listen, o.advertise, o.topics, o.partitions
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
	security, err := securityOpts(o)
	if err != nil {
		return err
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
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(o.maxMessageBytes)}),
	}
	opts = append(opts, security...)
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(partitions), topics...))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer cluster.Close()
	if o.controlListen != "" {
		stopControl, err := serveControl(o.controlListen, newWriteControl(cluster))
		if err != nil {
			return err
		}
		defer stopControl()
	}

	// With -advertise, ListenAddrs reports the advertised address.
	addrs := strings.Join(cluster.ListenAddrs(), ",")
	log.Printf("kfakebroker: listening on %s, clients told %s, topics %v x %d partitions",
		listening, addrs, topics, partitions)
	if o.readyFile != "" {
		if err := os.WriteFile(o.readyFile, []byte(addrs), 0o600); err != nil {
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
