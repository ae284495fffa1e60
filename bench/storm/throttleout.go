package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// throttleMain runs the throttle scenarios of cfg, prints one line per
// scenario on stdout and, when cfg.out is set, writes throttle.md and the
// charts there.
func throttleMain(ctx context.Context, cfg config, args []string) error {
	c := defaultTConfig(cfg)
	c.scenarios = cfg.throttle
	res := runThrottle(ctx, c)
	res.command = strings.Join(append([]string{"go run ./storm"}, args...), " ")
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; no files written")
	}
	lines, _ := throttleLines(res)
	for _, l := range lines {
		fmt.Println(l)
	}
	if cfg.out == "" {
		return nil
	}
	return writeThrottle(res, cfg.out)
}

// writeThrottle writes throttle.md and the charts of res into dir.
func writeThrottle(res *tresults, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "throttle.md"), []byte(throttleReport(res)), 0o644); err != nil {
		return err
	}
	if len(res.outage) > 0 {
		runs := make([]*run, len(res.outage))
		for i, r := range res.outage {
			runs[i] = r.run
		}
		title := fmt.Sprintf("Outage: every request 503 from %v to %v", res.cfg.healthy, res.cfg.healthy+res.cfg.outage)
		if err := hitsChart(filepath.Join(dir, "throttle-outage.svg"), title, runs); err != nil {
			return err
		}
	}
	if len(res.meta) > 0 {
		if err := metastableChart(filepath.Join(dir, "metastable.svg"), res.meta); err != nil {
			return err
		}
	}
	return nil
}

// metastableChart writes an SVG of goodput per second over time, one line
// per policy, with the trigger marked.
func metastableChart(path string, runs []*metaRun) error {
	p := plot.New()
	p.Title.Text = "Metastable overload: goodput after a 5 s capacity drop"
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = "successes/s (0.5 s mean)"
	p.Legend.Top = true
	p.Legend.Left = false
	p.Y.Min = 0
	phases := runs[0].phases
	n := min(int(total(phases)/bucket), len(runs[0].hitsAt))
	top := 0.0
	for i, r := range runs {
		avg := movingAverage(r.goodputAt()[:n], smooth)
		pts := make(plotter.XYs, n)
		for j := range n {
			pts[j].X = (float64(j) + 0.5) * bucket.Seconds()
			pts[j].Y = avg[j] / bucket.Seconds()
			top = max(top, pts[j].Y)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.2)
		l.LineStyle.Color = palette[i%len(palette)]
		l.LineStyle.Dashes = plotutil.Dashes(i)
		if r.policy.key == keyThrottle {
			l.LineStyle.Width = vg.Points(2.4)
			l.LineStyle.Dashes = nil
		}
		p.Add(l)
		p.Legend.Add(r.label()+": "+recoveryText(r.recovered, r.ok), l)
	}
	p.Y.Max = top * 1.5
	p.X.Min, p.X.Max = 0, total(phases).Seconds()+0.3
	p.X.Tick.Marker = secondsTicker{}
	p.Y.Tick.Marker = plainTicks{}
	if err := markPhases(p, phases); err != nil {
		return err
	}
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
