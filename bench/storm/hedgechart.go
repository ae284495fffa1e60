package main

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// tailChart writes an SVG of every run's latency quantiles, from the
// median to p99.95, on a scale of nines, one line per policy: hedging
// shows as the line that stays down where the single attempt's climbs to
// the slow requests' second.
func tailChart(path, title string, runs []*hedgeRun) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "quantile"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	// Nines: 1 is p90, 2 p99, 3 p99.9.
	const lo, hi, steps = 0.3, 3.3, 120
	p.X.Min, p.X.Max = lo, hi
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{
		{Value: 0.30103, Label: "p50"}, {Value: 1, Label: "p90"}, {Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"},
	})
	for i, r := range runs {
		d := slices.Clone(r.lat)
		slices.Sort(d)
		pts := make(plotter.XYs, 0, steps+1)
		for k := range steps + 1 {
			x := lo + (hi-lo)*float64(k)/steps
			ms := float64(rank(d, 1-math.Pow(10, -x))) / float64(time.Millisecond)
			pts = append(pts, plotter.XY{X: x, Y: max(ms, 0.1)})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.2)
		l.LineStyle.Color = palette[i%len(palette)]
		l.LineStyle.Dashes = plotutil.Dashes(i)
		if r.policy.key == "adaptive" {
			// The line the chart is about: solid and heavier.
			l.LineStyle.Width = vg.Points(2.4)
			l.LineStyle.Dashes = nil
		}
		p.Add(l)
		p.Legend.Add(r.policy.name, l)
	}
	p.Legend.YOffs = -vg.Points(10) // clear of the title
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
