package main

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart geometry: small enough that a committed PNG stays well under
// 100 KB.
const (
	chartWidth       = 7 * vg.Inch
	chartPanelHeight = 2.6 * vg.Inch
	chartDPI         = 96
	binsPerDecade    = 20 // latency histogram bins
)

// chartFiles are the PNG files of --png, created before the run so that a
// path that cannot be written fails at once. Not safe for concurrent use.
type chartFiles struct {
	load, latency, throughput *os.File
	drawn                     bool
}

// createChartFiles creates base-load.png, base-latency.png and
// base-throughput.png.
func createChartFiles(base string) (*chartFiles, error) {
	var files []*os.File
	for _, name := range []string{"-load.png", "-latency.png", "-throughput.png"} {
		f, err := os.Create(base + name)
		if err != nil {
			for _, f := range files {
				f.Close()
				os.Remove(f.Name())
			}
			return nil, err
		}
		files = append(files, f)
	}
	return &chartFiles{load: files[0], latency: files[1], throughput: files[2]}, nil
}

func (c *chartFiles) files() []*os.File { return []*os.File{c.load, c.latency, c.throughput} }

func (c *chartFiles) names() []string {
	var names []string
	for _, f := range c.files() {
		names = append(names, f.Name())
	}
	return names
}

// close closes the files; it removes them when no chart was drawn (the
// run failed), rather than leave empty PNG files.
func (c *chartFiles) close() {
	for _, f := range c.files() {
		f.Close()
		if !c.drawn {
			os.Remove(f.Name())
		}
	}
}

// draw writes the load chart (one panel per run: commands per step per
// shard), the latency chart (the latency distribution of every run) and
// the throughput chart (each run's ops/s and CPU per op, side by side).
func (c *chartFiles) draw(results []*result) error {
	plots := make([][]*plot.Plot, len(results))
	for i, r := range results {
		p, err := loadPlot(r)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.NewWith(vgimg.UseWH(chartWidth, chartPanelHeight*vg.Length(len(results))), vgimg.UseDPI(chartDPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(results), Cols: 1, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: vg.Millimeter, PadY: 3 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	c.drawn = true // from here on, a failure leaves what was written
	if err := writePNG(c.load, img); err != nil {
		return err
	}

	p, err := latencyPlot(results)
	if err != nil {
		return err
	}
	img = vgimg.NewWith(vgimg.UseWH(chartWidth, chartPanelHeight+0.6*vg.Inch), vgimg.UseDPI(chartDPI))
	p.Draw(draw.New(img))
	if err := writePNG(c.latency, img); err != nil {
		return err
	}
	return c.drawThroughput(results)
}

// drawThroughput draws two bar panels, ops/s and CPU µs per op, with a
// bar per run.
func (c *chartFiles) drawThroughput(results []*result) error {
	names := make([]string, len(results))
	ops, cpu := make(plotter.Values, len(results)), make(plotter.Values, len(results))
	short := map[string]string{"redshard-autopipeline": "redshard AutoPipeline", "goredis-ring": "go-redis Ring",
		"goredis-autopipeline": "go-redis AutoPipeline (1 server)"}
	for i, r := range results {
		names[i] = cmp.Or(short[r.system], r.system)
		ops[i] = r.throughput()
		cpu[i] = r.cpuPerOpNs() / 1e3
	}
	panel := func(title, ylabel string, v plotter.Values, col color.Color) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.Y.Tick.Marker = compactTicks{}
		bars, err := plotter.NewBarChart(v, vg.Points(40))
		if err != nil {
			return nil, err
		}
		bars.Color = col
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.NominalX(names...)
		return p, nil
	}
	pOps, err := panel("throughput (same run)", "ops/s", ops, plotutil.Color(0))
	if err != nil {
		return err
	}
	pCPU, err := panel("client CPU per operation", "µs/op", cpu, plotutil.Color(1))
	if err != nil {
		return err
	}
	plots := [][]*plot.Plot{{pOps}, {pCPU}}
	img := vgimg.NewWith(vgimg.UseWH(chartWidth, 2*chartPanelHeight), vgimg.UseDPI(chartDPI))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: vg.Millimeter, PadY: 3 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, draw.New(img))
	pOps.Draw(canvases[0][0])
	pCPU.Draw(canvases[1][0])
	return writePNG(c.throughput, img)
}

func writePNG(f *os.File, img *vgimg.Canvas) error {
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return err
	}
	return f.Sync()
}

// loadPlot draws the commands each shard's client was handed per step.
func loadPlot(r *result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: commands per %v per shard", r.system, r.tl.step)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "commands"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	names := make([]string, 0, len(r.tl.series))
	for name := range r.tl.series {
		names = append(names, name)
	}
	slices.Sort(names)
	var peak float64
	for i, name := range names {
		ser := r.tl.series[name]
		xys := make(plotter.XYs, len(ser))
		for j, v := range ser {
			xys[j] = plotter.XY{X: float64(j+1) * r.tl.step.Seconds(), Y: float64(v)}
			peak = max(peak, float64(v))
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(name, l)
	}
	for _, e := range r.events {
		l, err := plotter.NewLine(plotter.XYs{{X: e.at.Seconds(), Y: 0}, {X: e.at.Seconds(), Y: peak}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 96}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
	p.X.Tick.Marker = compactTicks{}
	p.Y.Tick.Marker = compactTicks{}
	p.Y.Min = 0
	p.Y.Max = peak * 1.6 // room for the legend
	return p, nil
}

// latencyPlot draws each run's latency distribution: the fraction of
// operations per 1/binsPerDecade of a decade, on a log time axis.
func latencyPlot(results []*result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "latency of every operation"
	p.X.Label.Text = "latency (µs, log scale)"
	p.Y.Label.Text = fmt.Sprintf("fraction of ops per 1/%d decade", binsPerDecade)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	var peak float64
	for i, r := range results {
		h := &r.t.hist
		if h.n == 0 {
			continue
		}
		bins := map[int]uint64{}
		lo, hi := math.MaxInt, math.MinInt
		for b, c := range h.counts {
			if c == 0 {
				continue
			}
			bl, bh := bucketBounds(b)
			us := max(float64(bl+bh)/2/1e3, 1)
			bin := int(math.Floor(math.Log10(us) * binsPerDecade))
			bins[bin] += c
			lo, hi = min(lo, bin), max(hi, bin)
		}
		var xys plotter.XYs
		for b := lo - 1; b <= hi+1; b++ {
			x := math.Pow(10, (float64(b)+0.5)/binsPerDecade)
			xys = append(xys, plotter.XY{X: x, Y: float64(bins[b]) / float64(h.n)})
			peak = max(peak, xys[len(xys)-1].Y)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.StepStyle = plotter.MidStep
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s  p50 %s  p99 %s  p999 %s", r.system,
			fmtDur(h.quantile(0.5)), fmtDur(h.quantile(0.99)), fmtDur(h.quantile(0.999))), l)
	}
	p.Y.Tick.Marker = compactTicks{}
	p.Y.Min = 0
	p.Y.Max = peak * (1.15 + 0.12*float64(len(results))) // room for the legend
	return p, nil
}

// compactTicks are plot.DefaultTicks labelled by tickLabel: "2500" is
// "2.5k", not "2500.00".
type compactTicks struct{}

func (compactTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" { // minor ticks have none
			ticks[i].Label = tickLabel(ticks[i].Value)
		}
	}
	return ticks
}

// tickLabel formats an axis value with at most three significant digits
// and no trailing zeros, thousands as k and millions as M: 0, 0.25, 40,
// 2.5k, 12k, 1.2M.
func tickLabel(v float64) string {
	unit := ""
	switch a := math.Abs(v); {
	case a >= 1e9:
		v, unit = v/1e9, "G"
	case a >= 1e6:
		v, unit = v/1e6, "M"
	case a >= 1e3:
		v, unit = v/1e3, "k"
	}
	// Three significant digits, then the shortest decimal form: no
	// "2500.00", no float noise such as 0.30000000000000004.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + unit
}
