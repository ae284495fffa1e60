package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// writeOutputs writes results.md, timeline.csv, contention.csv and the
// charts of res into dir, creating it if needed.
func writeOutputs(res *results, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(report(res)), 0o644); err != nil {
		return err
	}
	var runs []*run
	runs = append(append(append(runs, res.outage...), res.brownout...), res.fleet...)
	if err := writeTimeline(filepath.Join(dir, "timeline.csv"), runs); err != nil {
		return err
	}
	if len(res.contention) > 0 {
		if err := writeContention(filepath.Join(dir, "contention.csv"), res.contention); err != nil {
			return err
		}
		if err := contentionChart(filepath.Join(dir, "contention.svg"), "Contention: total calls until every client succeeded",
			"server hits", res.contention, func(c contention) float64 { return float64(c.calls) }); err != nil {
			return err
		}
		if err := contentionChart(filepath.Join(dir, "contention-time.svg"), "Contention: time until the last client succeeded",
			"seconds", res.contention, func(c contention) float64 { return c.completion.Seconds() }); err != nil {
			return err
		}
	}
	c := res.cfg
	charts := []struct {
		file, title string
		runs        []*run
	}{
		{"outage.svg", fmt.Sprintf("Outage: every request 503 from %v to %v", c.phase, 2*c.phase), res.outage},
		{"brownout.svg", fmt.Sprintf("Brownout: capacity at %.0f%% from %v to %v", 100*c.brownout, c.phase, 2*c.phase), res.brownout},
		{"fleet.svg", "Outage, httpretry over P client processes: a budget each, or one in Redis", res.fleet},
	}
	for _, ch := range charts {
		if len(ch.runs) == 0 {
			continue
		}
		if err := hitsChart(filepath.Join(dir, ch.file), ch.title, ch.runs); err != nil {
			return fmt.Errorf("%s: %w", ch.file, err)
		}
	}
	return nil
}

// writeTimeline writes one row per run and 100ms bucket, through the end
// of the schedule and the longest deadline after it.
func writeTimeline(path string, runs []*run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"scenario", "policy", "processes", "t_s", "phase", "hits", "successes", "failures", "conns"})
	for _, r := range runs {
		good, bad := r.successesAt(), r.failuresAt()
		n := min(len(r.hitsAt), int((total(r.phases)+r.deadline)/bucket)+1)
		for i := range n {
			at := time.Duration(i) * bucket
			w.Write([]string{
				r.scenario, r.policy.key, strconv.Itoa(r.processes),
				strconv.FormatFloat(at.Seconds(), 'f', 1, 64), phaseName(r.phases, at),
				strconv.FormatInt(r.hitsAt[i], 10), strconv.FormatInt(good[i], 10),
				strconv.FormatInt(bad[i], 10), strconv.FormatInt(r.connsAt[i], 10),
			})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// phaseName names the phase in force at t; "drain" after the schedule.
func phaseName(phases []phase, t time.Duration) string {
	for _, p := range phases {
		if t < p.dur {
			return p.name
		}
		t -= p.dur
	}
	return "drain"
}

func writeContention(path string, cs []contention) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"clients", "jitter", "calls", "succeeded", "completion_s", "conns"})
	for _, c := range cs {
		w.Write([]string{
			strconv.Itoa(c.clients), c.jitter, strconv.FormatInt(c.calls, 10), strconv.Itoa(c.succeeded),
			strconv.FormatFloat(c.completion.Seconds(), 'f', 3, 64), strconv.FormatInt(c.conns, 10),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
