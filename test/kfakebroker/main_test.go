package main

import (
	"net"
	"reflect"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSplitList(t *testing.T) {
	got := splitList(" otlp_spans, ,otlp_metrics,")
	if want := []string{"otlp_spans", "otlp_metrics"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("splitList = %v, want %v", got, want)
	}
	if got := splitList(""); got != nil {
		t.Fatalf("splitList(\"\") = %v, want nil", got)
	}
}

// kfake puts the listener's Addr() into metadata responses: the wrapper must
// report the advertised address while accepting on the real one.
func TestAdvertisedListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adv := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	wrapped := advertisedListener{Listener: ln, addr: adv}
	defer wrapped.Close()
	if wrapped.Addr().String() != "127.0.0.1:1" {
		t.Fatalf("Addr() = %s, want the advertised 127.0.0.1:1", wrapped.Addr())
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dialing the real address: %v", err)
	}
	conn.Close()
	accepted, err := wrapped.Accept()
	if err != nil {
		t.Fatalf("accept on the real address: %v", err)
	}
	accepted.Close()
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(options{listen: "no-port", partitions: 1, maxMessageBytes: 1}); err == nil {
		t.Error("run accepted -listen without a port")
	}
	if err := run(options{listen: "127.0.0.1:0", maxMessageBytes: 1}); err == nil {
		t.Error("run accepted -partitions 0")
	}
}
