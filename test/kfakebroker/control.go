package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeControl makes topics unwritable and writable again while the broker
// runs, so that a test can take one topic away (a Kafka whose in-sync
// replicas fell below min.insync.replicas for it) without wiping the others.
// Produce requests for an unwritable topic are answered NOT_ENOUGH_REPLICAS
// for each of its partitions: retriable, as a real outage is, so producers
// keep their records and retry. Reads and other topics are unaffected.
type writeControl struct {
	cluster *kfake.Cluster
	mu      sync.Mutex
	blocked map[string]*kfake.FaultHandle
	// refused counts the produce requests refused per topic, across
	// outages.
	refused map[string]int
}

func newWriteControl(c *kfake.Cluster) *writeControl {
	return &writeControl{cluster: c, blocked: map[string]*kfake.FaultHandle{}, refused: map[string]int{}}
}

// setWritable blocks or unblocks produce requests to topic.
func (w *writeControl) setWritable(topic string, writable bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, blocked := w.blocked[topic]
	switch {
	case !writable && !blocked:
		w.blocked[topic] = w.cluster.Fault(kfake.Fault{
			Keys:  []kmsg.Key{kmsg.Produce},
			Topic: topic,
			Err:   kerr.NotEnoughReplicas,
			Count: -1,
		})
	case writable && blocked:
		h.Remove()
		w.refused[topic] += h.Hits()
		delete(w.blocked, topic)
	}
}

// topicState is the control endpoint's answer.
type topicState struct {
	Topic      string `json:"topic"`
	Unwritable bool   `json:"unwritable"`
	// Refused is how many produce requests for the topic were refused.
	Refused int `json:"refused"`
}

func (w *writeControl) state(topic string) topicState {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := topicState{Topic: topic, Refused: w.refused[topic]}
	if h, ok := w.blocked[topic]; ok {
		s.Unwritable = true
		s.Refused += h.Hits()
	}
	return s
}

// handler serves /topics/{topic}/unwritable: PUT makes the topic
// unwritable, DELETE writable again, GET reports its state.
func (w *writeControl) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/topics/{topic}/unwritable", func(rw http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		switch r.Method {
		case http.MethodPut:
			w.setWritable(topic, false)
		case http.MethodDelete:
			w.setWritable(topic, true)
		case http.MethodGet:
		default:
			rw.Header().Set("Allow", "GET, PUT, DELETE")
			http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.state(topic))
	})
	return mux
}

// serveControl serves the control endpoint on addr until the returned stop
// is called.
func serveControl(addr string, w *writeControl) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-control-listen %q: %w", addr, err)
	}
	srv := &http.Server{Handler: w.handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("kfakebroker: control endpoint: %v", err)
		}
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
