package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// notOwnerHint adds to a control refused by a standby how to reach the
// owner.
func notOwnerHint(err error) error {
	var ae *consoleclient.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return fmt.Errorf("%w\nhint: pass every replica's console (--server, repeatable) or the gateways' headless Service with --all-addresses, and the command goes to the owner", err)
	}
	return err
}

// printStatuses prints every server's role and status.
func printStatuses(p *printer, as []answer) error {
	if p.json {
		type one struct {
			Server string          `json:"server"`
			Status json.RawMessage `json:"status,omitempty"`
			Error  string          `json:"error,omitempty"`
		}
		var all struct {
			Servers []one `json:"servers"`
		}
		for _, a := range as {
			o := one{Server: a.label, Status: json.RawMessage(a.raw)}
			if a.err != nil {
				o.Status, o.Error = nil, a.err.Error()
			}
			all.Servers = append(all.Servers, o)
		}
		data, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return err
		}
		_, err = p.w.Write(append(data, '\n'))
		return err
	}
	tw := table(p.w)
	fmt.Fprintln(tw, "SERVER\tROLE\tREPLICA\tOWNER\tVERSION\tOPEN FAULTS")
	for _, a := range as {
		if a.err != nil {
			fmt.Fprintf(tw, "%s\tunreachable\t-\t-\t-\t%v\n", a.label, a.err)
			continue
		}
		s := a.status
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", a.label, dash(s.Role), memberName(s.Self), memberName(s.Owner), dash(s.Version), s.OpenFaults)
	}
	return tw.Flush()
}

func memberName(m *consoleclient.Member) string {
	if m == nil {
		return "-"
	}
	return m.Name
}

// printAllJobs lists the jobs of every server: each replica's straggler
// processor holds the jobs of its own partitions. A job held by two (a
// rebalance) is listed once, as most recently updated.
func printAllJobs(ctx context.Context, p *printer, as []answer) error {
	byKey := map[[2]string]consoleclient.Job{}
	var errs []error
	reached := 0
	for _, a := range as {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.label, a.err))
			continue
		}
		v, _, err := a.client.Jobs(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.label, err))
			continue
		}
		reached++
		for _, j := range v.Jobs {
			k := [2]string{j.Job, fmt.Sprint(j.Attempt)}
			if old, ok := byKey[k]; !ok || j.Updated.After(old.Updated) {
				byKey[k] = j
			}
		}
	}
	if reached == 0 {
		return errors.Join(errs...)
	}
	all := consoleclient.Jobs{Jobs: make([]consoleclient.Job, 0, len(byKey))}
	for _, j := range byKey {
		all.Jobs = append(all.Jobs, j)
	}
	sort.Slice(all.Jobs, func(i, j int) bool { return all.Jobs[i].Updated.After(all.Jobs[j].Updated) })
	raw, err := json.Marshal(all)
	if err != nil {
		return err
	}
	return p.print(raw, nil, func() { printJobs(p, all.Jobs) })
}

// printAnyHeatmap asks the owner for a job's heatmap, then the others: the
// replica whose straggler processor holds the job has it.
func printAnyHeatmap(ctx context.Context, p *printer, owner answer, as []answer, job string, attempt int64) error {
	order := []answer{owner}
	for _, a := range as {
		if a.label != owner.label && a.err == nil {
			order = append(order, a)
		}
	}
	var firstErr error
	for _, a := range order {
		v, raw, err := a.client.Heatmap(ctx, job, attempt)
		if err == nil {
			return p.print(raw, nil, func() { printHeatmap(p, v) })
		}
		var ae *consoleclient.APIError
		if firstErr == nil || (errors.As(firstErr, &ae) && ae.Status == http.StatusNotFound) {
			firstErr = err
		}
	}
	return firstErr
}
