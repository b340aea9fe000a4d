package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic made unwritable through the control endpoint refuses produce
// requests with a retriable error while another topic takes records; made
// writable again, it takes them. Reads are not affected.
func TestWriteControl(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "gpu_faults", "otlp_logs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	srv := httptest.NewServer(newWriteControl(cluster).handler())
	defer srv.Close()

	// Few retries: the refused record fails with the broker's error
	// instead of being retried until the delivery timeout.
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.RecordRetries(2), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	produce := func(topic string) error {
		return client.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}).FirstErr()
	}

	if err := produce("gpu_faults"); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	if s := call(t, http.MethodPut, srv.URL+"/topics/gpu_faults/unwritable"); !s.Unwritable || s.Topic != "gpu_faults" {
		t.Fatalf("PUT answered %+v, want gpu_faults unwritable", s)
	}
	if err := produce("gpu_faults"); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("producing to the unwritable topic: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if err := produce("otlp_logs"); err != nil {
		t.Fatalf("another topic during the outage: %v", err)
	}
	s := call(t, http.MethodGet, srv.URL+"/topics/gpu_faults/unwritable")
	if !s.Unwritable || s.Refused < 1 {
		t.Fatalf("GET answered %+v, want unwritable with refused requests", s)
	}
	if s := call(t, http.MethodGet, srv.URL+"/topics/otlp_logs/unwritable"); s.Unwritable || s.Refused != 0 {
		t.Fatalf("otlp_logs: %+v, want writable, nothing refused", s)
	}

	refused := s.Refused
	if s := call(t, http.MethodDelete, srv.URL+"/topics/gpu_faults/unwritable"); s.Unwritable || s.Refused != refused {
		t.Fatalf("DELETE answered %+v, want writable with the %d refused requests kept", s, refused)
	}
	if err := produce("gpu_faults"); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	// Both records that were accepted are there to read.
	reader, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("gpu_faults"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for n := 0; n < 2; {
		fetches := reader.PollFetches(context.Background())
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		n += fetches.NumRecords()
	}

	resp, err := http.Post(srv.URL+"/topics/gpu_faults/unwritable", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", resp.StatusCode)
	}
}

func TestServeControlRejectsBadAddress(t *testing.T) {
	if _, err := serveControl("no-port", nil); err == nil {
		t.Error("serveControl accepted an address without a port")
	}
}

func call(t *testing.T, method, url string) topicState {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d", method, url, resp.StatusCode)
	}
	var s topicState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
