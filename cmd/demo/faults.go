package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// consumeFaults reads the gpu_faults topic from the beginning, as a
// downstream consumer of fault records would, and hands every record to
// onRecord with its arrival time until ctx ends.
func consumeFaults(ctx context.Context, broker string, onRecord func(fault.Record, time.Time), onError func(error)) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("gpu_faults"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer client.Close()
	var un plog.ProtoUnmarshaler
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			ld, err := un.UnmarshalLogs(r.Value)
			if err != nil {
				onError(fmt.Errorf("gpu_faults: a message that is not OTLP logs: %w", err))
				return
			}
			records, errs := fault.FromLogs(ld)
			for _, err := range errs {
				onError(fmt.Errorf("gpu_faults: %w", err))
			}
			for _, rec := range records {
				onRecord(rec, now)
			}
		})
	}
	return nil
}

// topology maps what a fault record names back to the simulated job.
type topology struct {
	jobID       string
	gpusPerNode int
	hostIndex   map[string]int
	gpuOf       map[string][2]int // GPU UUID -> node index, GPU index
}

func newTopology(nodes []testbed.NodeInputs, gpusPerNode int) *topology {
	t := &topology{gpusPerNode: gpusPerNode, hostIndex: map[string]int{}, gpuOf: map[string][2]int{}}
	for _, n := range nodes {
		t.jobID = n.JobID
		t.hostIndex[n.Host] = n.Index
		for g, uuid := range n.GPUUUIDs {
			t.gpuOf[uuid] = [2]int{n.Index, g}
		}
	}
	return t
}

// place is where a record points in the job; -1 where it does not say.
type place struct {
	host            string
	node, gpu, rank int
}

func (t *topology) locate(r fault.Record) place {
	p := place{host: r.HostName, node: -1, gpu: -1, rank: -1}
	if r.RankKnown {
		p.rank = int(r.Rank)
	}
	switch r.Entity.Kind {
	case fault.EntityNode, fault.EntityNVLinkDomain:
		if p.host == "" {
			p.host = r.Entity.Key
		}
	case fault.EntityIBPort:
		if p.host == "" {
			p.host, _, _ = strings.Cut(r.Entity.Key, "/")
		}
	case fault.EntityRank:
		if job, rank, ok := strings.Cut(r.Entity.Key, "/"); ok && job == t.jobID {
			if n, err := strconv.Atoi(rank); err == nil {
				p.rank = n
			}
		}
	}
	uuid := r.GPUUUID
	if uuid == "" && r.Entity.Kind == fault.EntityGPU {
		uuid = r.Entity.Key
	}
	if ng, ok := t.gpuOf[uuid]; ok {
		p.node, p.gpu = ng[0], ng[1]
	}
	if p.node < 0 && p.rank >= 0 && t.gpusPerNode > 0 {
		p.node, p.gpu = p.rank/t.gpusPerNode, p.rank%t.gpusPerNode
	}
	if i, ok := t.hostIndex[p.host]; ok && p.node < 0 {
		p.node = i
	}
	if p.host == "" && p.node >= 0 {
		for h, i := range t.hostIndex {
			if i == p.node {
				p.host = h
			}
		}
	}
	if p.rank < 0 && p.node >= 0 && p.gpu >= 0 {
		p.rank = p.node*t.gpusPerNode + p.gpu
	}
	return p
}

func orDash(v int) string {
	if v < 0 {
		return "-"
	}
	return strconv.Itoa(v)
}

func orDashS(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// faultLine is the one line a record gets on the terminal. Updates (new
// evidence every evaluation while a fault lasts) leave the cause out.
func faultLine(r fault.Record, p place, sinceOnset string) string {
	line := fmt.Sprintf("FAULT %-8s %-18s %s  onset%s  node=%s gpu=%s rank=%s job=%s  action=%s",
		r.State, r.Type, r.Severity, sinceOnset, orDashS(p.host), orDash(p.gpu), orDash(p.rank),
		orDashS(r.JobID), r.Action)
	if r.State == fault.StateUpdate {
		return line
	}
	return line + "  cause=" + cause(r)
}

// cause is the rule that matched and its evidence: the record's sentence
// ("<type> on <entity> (node <host>): <evidence> -> <action>") without
// what the line already says.
func cause(r fault.Record) string {
	evidence := r.Summary
	if _, rest, ok := strings.Cut(evidence, "): "); ok {
		evidence = rest
	}
	evidence = strings.TrimSuffix(evidence, " -> "+string(r.Action))
	if r.Rule == "" {
		return evidence
	}
	return r.Rule + " [" + evidence + "]"
}

// faultJSON is a fault record as one line of faults.jsonl, keyed by the
// attribute names of docs/fault-record.md.
type faultJSON struct {
	ReceivedAt  time.Time         `json:"received_at"`
	ID          string            `json:"fault.id"`
	Type        fault.Type        `json:"fault.type"`
	State       fault.State       `json:"fault.state"`
	Severity    fault.Severity    `json:"fault.severity"`
	Confidence  float64           `json:"fault.confidence"`
	Rule        string            `json:"fault.rule,omitempty"`
	Action      fault.Action      `json:"fault.action"`
	BlastRadius fault.BlastRadius `json:"fault.blast_radius"`
	Entity      string            `json:"fault.entity"`
	FirstSeen   time.Time         `json:"fault.first_seen"`
	LastSeen    time.Time         `json:"fault.last_seen"`
	HostName    string            `json:"host.name,omitempty"`
	GPUUUID     string            `json:"gpu.uuid,omitempty"`
	JobID       string            `json:"training.job.id,omitempty"`
	Rank        *int64            `json:"training.rank,omitempty"`
	XID         int               `json:"gpu.xid,omitempty"`
	Body        string            `json:"body"`
	Evidence    []evidenceJSON    `json:"fault.evidence,omitempty"`
}

type evidenceJSON struct {
	Signal string    `json:"signal"`
	Value  float64   `json:"value"`
	Text   string    `json:"text,omitempty"`
	Time   time.Time `json:"time"`
}

func recordJSON(r fault.Record, at time.Time) ([]byte, error) {
	j := faultJSON{ReceivedAt: at, ID: r.ID, Type: r.Type, State: r.State, Severity: r.Severity,
		Confidence: r.Confidence, Rule: r.Rule, Action: r.Action, BlastRadius: r.BlastRadius,
		Entity: r.Entity.String(), FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, HostName: r.HostName,
		GPUUUID: r.GPUUUID, JobID: r.JobID, XID: r.XID, Body: r.Summary}
	if r.RankKnown {
		rank := r.Rank
		j.Rank = &rank
	}
	for _, ev := range r.Evidence {
		j.Evidence = append(j.Evidence, evidenceJSON{Signal: ev.Signal, Value: ev.Value, Text: ev.Text, Time: ev.Time})
	}
	return json.Marshal(j)
}
