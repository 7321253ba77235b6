package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// palette colours the series of a chart, in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// WriteHTML writes a self-contained report: summary tables and plots drawn
// as inline SVG (latency percentiles, gap histogram, throughput over time).
// It has no scripts and no external assets, so it reads offline, and it is
// well-formed XML (XHTML syntax), which the tests check. cmp may be nil.
func WriteHTML(w io.Writer, results []*Result, cmp *Comparison) {
	e := html.EscapeString
	writeHTMLHead(w)
	if cmp != nil {
		results = append(append([]*Result(nil), cmp.A...), cmp.B...)
		fmt.Fprintf(w, "<h2>Comparison (%d rounds, A B alternating)</h2>\n<table><tr><th class=\"l\">figure</th><th>A</th><th>B</th><th>B/A</th><th class=\"l\">per round</th></tr>\n", cmp.Rounds)
		for _, f := range cmp.Figures {
			ratio, cls := "n/a", ""
			if len(f.Ratios) > 0 {
				ratio = fmt.Sprintf("%.3f", f.Ratio)
				switch b := better(f); b {
				case "(B better)":
					cls = "better"
				case "(A better)":
					cls = "worse"
				}
			}
			var per []string
			for _, r := range f.Ratios {
				per = append(per, fmt.Sprintf("%.3f", r))
			}
			fmt.Fprintf(w, "<tr><td class=\"l\">%s (%s)</td><td>%.3f</td><td>%.3f</td><td class=\"%s\">%s</td><td class=\"l\">%s</td></tr>\n",
				e(f.Name), e(f.Unit), f.A, f.B, cls, ratio, e(strings.Join(per, " ")))
		}
		fmt.Fprint(w, "</table>\n")
	}
	fmt.Fprint(w, "<h2>Runs</h2>\n<table><tr><th class=\"l\">run</th><th class=\"l\">dialect</th><th class=\"l\">load</th><th>window s</th><th>ok</th><th>errors</th><th>tok/s</th><th>req/s</th><th>TTFT p50</th><th>TTFT p99</th><th>gap p50</th><th>gap p99</th><th>gap p99.9</th><th>gap-itl p99</th><th>server µs/tok</th><th>server peak RSS MiB</th></tr>\n")
	for i, r := range results {
		load := fmt.Sprintf("c=%d", r.Concurrency)
		if r.Mode == "open" {
			load = fmt.Sprintf("rate=%.1f/s", r.Rate)
		}
		cpu, rss := "", ""
		if r.Server != nil {
			cpu = fmt.Sprintf("%.2f", r.Server.CPUMicrosPerTok)
			rss = fmt.Sprintf("%.1f", float64(r.Server.PeakRSSBytes)/(1<<20))
		}
		fmt.Fprintf(w, "<tr><td class=\"l\">%s</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%.2f</td><td>%d</td><td>%d</td><td>%.1f</td><td>%.2f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%s</td><td>%s</td></tr>\n",
			e(runName(i, r)), e(string(r.Dialect)), e(load), r.WindowS, r.Requests, r.Errors, r.TokensPerSec, r.RequestsPerSec,
			r.TTFT.P50, r.TTFT.P99, r.Gap.P50, r.Gap.P99, r.Gap.P999, r.ServerAdded.P99, cpu, rss)
	}
	fmt.Fprint(w, "</table>\n<p>Latencies in milliseconds. gap-itl is the inter-token gap minus the engine's configured inter-token latency: what the server adds.</p>\n")

	qs := []struct {
		label string
		get   func(Latency) float64
	}{{"p50", func(l Latency) float64 { return l.P50 }}, {"p90", func(l Latency) float64 { return l.P90 }},
		{"p99", func(l Latency) float64 { return l.P99 }}, {"p99.9", func(l Latency) float64 { return l.P999 }},
		{"max", func(l Latency) float64 { return l.Max }}}
	xl := make([]string, len(qs))
	for i, q := range qs {
		xl[i] = q.label
	}
	for _, m := range []struct {
		title string
		get   func(*Result) Latency
	}{{"Time to first token (ms)", func(r *Result) Latency { return r.TTFT }},
		{"Inter-token gap (ms)", func(r *Result) Latency { return r.Gap }},
		{"End-to-end (ms)", func(r *Result) Latency { return r.E2E }}} {
		var ss []series
		for i, r := range results {
			l := m.get(r)
			if l.Count == 0 {
				continue
			}
			s := series{name: runName(i, r)}
			for j, q := range qs {
				s.pts = append(s.pts, [2]float64{float64(j), q.get(l)})
			}
			ss = append(ss, s)
		}
		chart{title: m.title + " by percentile", xlabel: "percentile", ylabel: "ms", xcat: xl, markers: true}.write(w, ss)
	}

	var hs []series
	for i, r := range results {
		if len(r.GapBins) == 0 {
			continue
		}
		s := series{name: runName(i, r), step: true}
		var total uint64
		for _, b := range r.GapBins {
			total += b.Count
		}
		for _, b := range r.GapBins {
			frac := float64(b.Count) / float64(total) * 100
			lo, hi := math.Max(float64(b.LoNs)/1e6, 1e-3), math.Max(float64(b.HiNs)/1e6, 1e-3)
			s.pts = append(s.pts, [2]float64{lo, 0}, [2]float64{lo, frac}, [2]float64{hi, frac}, [2]float64{hi, 0})
		}
		hs = append(hs, s)
	}
	chart{title: "Inter-token gap histogram", xlabel: "gap (ms, log scale)", ylabel: "% of gaps", xlog: true}.write(w, hs)

	var ts []series
	var shade float64
	for i, r := range results {
		s := series{name: runName(i, r)}
		for _, p := range r.Timeline {
			s.pts = append(s.pts, [2]float64{p.T, p.TokensPerSec})
		}
		if len(s.pts) > 0 {
			ts = append(ts, s)
		}
		shade = math.Max(shade, r.WarmupS)
	}
	chart{title: "Delivered tokens per second over time (shaded: warm-up)", xlabel: "seconds since start", ylabel: "tokens/s", shadeTo: shade}.write(w, ts)
	fmt.Fprint(w, "</body></html>\n")
}

// writeHTMLHead writes the report's head, style and title.
func writeHTMLHead(w io.Writer) {
	fmt.Fprint(w, `<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/><title>vajra bench report</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
svg{background:#fff;border:1px solid #ddd;margin:6px 12px 12px 0}
.better{color:#2a7d2a}.worse{color:#b22}
</style></head><body>
<h1>vajra bench report</h1>
`)
}

// WriteRampHTML writes a ramp report: per server a table of its levels and
// its knee, and plots of the server-added gap p99 (with the threshold),
// tokens/s and server CPU per token against the streams. Like WriteHTML it
// is self-contained, script-free XHTML.
func WriteRampHTML(w io.Writer, rep *RampReport) {
	e := html.EscapeString
	writeHTMLHead(w)
	fmt.Fprintf(w, "<h2>Ramp: the knee is the most streams with a server-added gap p99 &lt;= %.3g ms</h2>\n", rep.ThresholdMs)
	fmt.Fprint(w, "<table><tr><th class=\"l\">server</th><th>itl ms</th><th>knee (streams)</th><th class=\"l\">note</th></tr>\n")
	for _, r := range rep.Ramps {
		fmt.Fprintf(w, "<tr><td class=\"l\">%s</td><td>%.3g</td><td>%d</td><td class=\"l\">%s</td></tr>\n", e(r.Label), r.ITLMillis, r.Knee, e(r.KneeText()))
	}
	fmt.Fprint(w, "</table>\n")
	for _, r := range rep.Ramps {
		fmt.Fprintf(w, "<h3>%s (%s)</h3>\n<table><tr><th>streams</th><th>tok/s</th><th>gap p50</th><th>gap p99</th><th>gap-itl p99</th><th>server µs/tok</th><th>server cores</th><th>client cores</th><th>errors</th><th class=\"l\">verdict</th></tr>\n", e(r.Label), e(r.URL))
		for _, l := range r.Levels {
			verdict, cls := "pass", "better"
			if !l.Pass {
				verdict, cls = "fail", "worse"
			}
			if l.ClientBound {
				verdict += ", client-bound"
			}
			fmt.Fprintf(w, "<tr><td>%d</td><td>%.1f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td class=\"l %s\">%s</td></tr>\n",
				l.Streams, l.TokensPerSec, l.GapP50Ms, l.GapP99Ms, l.ServerAddedP99Ms, optFloat(l.ServerCPUPerTokenUs, 2),
				optFloat(l.ServerCPUCores, 2), optFloat(l.ClientCPUCores, 2), l.Errors, cls, verdict)
		}
		fmt.Fprint(w, "</table>\n")
	}
	plot := func(title, ylabel string, get func(RampLevel) float64, threshold bool, ymax float64) {
		var ss []series
		var x0, x1 float64 = math.Inf(1), math.Inf(-1)
		for _, r := range rep.Ramps {
			s := series{name: fmt.Sprintf("%s (knee %d)", r.Label, r.Knee)}
			for _, l := range r.Levels {
				if v := get(l); !math.IsNaN(v) {
					s.pts = append(s.pts, [2]float64{float64(l.Streams), v})
					x0, x1 = math.Min(x0, float64(l.Streams)), math.Max(x1, float64(l.Streams))
				}
			}
			if len(s.pts) > 0 {
				ss = append(ss, s)
			}
		}
		if threshold && len(ss) > 0 {
			ss = append(ss, series{name: fmt.Sprintf("threshold %.3g ms", rep.ThresholdMs),
				pts: [][2]float64{{x0, rep.ThresholdMs}, {x1, rep.ThresholdMs}}})
		}
		chart{title: title, xlabel: "concurrent streams", ylabel: ylabel, markers: true, ymax: ymax}.write(w, ss)
	}
	// Past the knee the p99 grows by orders of magnitude: the axis stops
	// at about 4x the threshold so that the threshold and the knee stay legible.
	capMs := niceCeil(4 * rep.ThresholdMs)
	plot(fmt.Sprintf("Server-added inter-token gap p99 by streams (axis cut at %.3g ms)", capMs), "ms", func(l RampLevel) float64 {
		if l.Gaps == 0 {
			return math.NaN()
		}
		return l.ServerAddedP99Ms
	}, true, capMs)
	plot("Delivered tokens per second by streams", "tokens/s", func(l RampLevel) float64 { return l.TokensPerSec }, false, 0)
	plot("Server CPU per token by streams", "µs", func(l RampLevel) float64 {
		if l.ServerCPUPerTokenUs < 0 {
			return math.NaN()
		}
		return l.ServerCPUPerTokenUs
	}, false, 0)
	fmt.Fprint(w, "</body></html>\n")
}

func runName(i int, r *Result) string {
	name := r.Label
	if name == "" {
		name = r.URL
	}
	return fmt.Sprintf("#%d %s", i+1, name)
}

type series struct {
	name string
	pts  [][2]float64
	step bool // drawn as an outline (histograms)
}

// chart draws one SVG plot.
type chart struct {
	title, xlabel, ylabel string
	xcat                  []string // categorical x axis labels at 0..n-1
	xlog                  bool
	markers               bool
	shadeTo               float64 // shade x in [0, shadeTo]
	// ymax > 0 caps the y axis: larger values are drawn at the top edge.
	ymax float64
}

const (
	chartW, chartH         = 640, 320
	padL, padR, padT, padB = 64, 16, 28, 44
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	legendLineH            = 14
)

func (c chart) write(w io.Writer, ss []series) {
	e := html.EscapeString
	legendH := legendLineH * len(ss)
	fmt.Fprintf(w, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n",
		chartW, chartH+legendH, chartW, chartH+legendH)
	fmt.Fprintf(w, "<title>%s</title>\n<text x=\"%d\" y=\"18\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", e(c.title), padL, e(c.title))
	if len(ss) == 0 {
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" fill=\"#888\">no data</text>\n</svg>\n", padL+10, padT+plotH/2)
		return
	}
	x0, x1, y1 := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for _, p := range s.pts {
			x0, x1, y1 = math.Min(x0, p[0]), math.Max(x1, p[0]), math.Max(y1, p[1])
		}
	}
	y0 := 0.0
	for _, s := range ss {
		for _, p := range s.pts {
			y0 = math.Min(y0, p[1]) // gap-itl can be negative
		}
	}
	if c.xcat != nil {
		x0, x1 = -0.5, float64(len(c.xcat))-0.5
	}
	if c.xlog {
		x0, x1 = math.Log10(x0), math.Log10(x1)
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	y1 = niceCeil(y1)
	if c.ymax > 0 && y1 > c.ymax {
		y1 = c.ymax
	}
	sx := func(x float64) float64 {
		if c.xlog {
			x = math.Log10(math.Max(x, 1e-9))
		}
		return padL + (x-x0)/(x1-x0)*plotW
	}
	sy := func(y float64) float64 { return padT + plotH - (math.Min(y, y1)-y0)/(y1-y0)*plotH }
	if c.shadeTo > 0 && !c.xlog && c.xcat == nil {
		fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#eee\"/>\n", padL, padT, math.Min(sx(c.shadeTo), padL+plotW)-padL, plotH)
	}
	// Axes and grid.
	fmt.Fprintf(w, "<g stroke=\"#999\" stroke-width=\"1\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/></g>\n",
		padL, padT, padL, padT+plotH, padL, padT+plotH, padL+plotW, padT+plotH)
	fmt.Fprint(w, "<g font-size=\"11\" fill=\"#444\">\n")
	for i := 0; i <= 4; i++ {
		y := y0 + (y1-y0)*float64(i)/4
		fmt.Fprintf(w, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			padL, sy(y), padL+plotW, sy(y), padL-4, sy(y)+4, fmtTick(y))
	}
	switch {
	case c.xcat != nil:
		for i, l := range c.xcat {
			fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", sx(float64(i)), padT+plotH+16, e(l))
		}
	case c.xlog:
		for d := math.Floor(x0); d <= math.Ceil(x1); d++ {
			v := math.Pow(10, d)
			if d < x0 || d > x1 {
				continue
			}
			fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", sx(v), padT+plotH+16, fmtTick(v))
		}
	default:
		for i := 0; i <= 5; i++ {
			x := x0 + (x1-x0)*float64(i)/5
			fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", sx(x), padT+plotH+16, fmtTick(x))
		}
	}
	fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", padL+plotW/2, padT+plotH+34, e(c.xlabel))
	fmt.Fprintf(w, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">%s</text>\n</g>\n", padT+plotH/2, padT+plotH/2, e(c.ylabel))
	for i, s := range ss {
		col := palette[i%len(palette)]
		var b strings.Builder
		for j, p := range s.pts {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", sx(p[0]), sy(p[1]))
		}
		fmt.Fprintf(w, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n", col, b.String())
		if c.markers {
			for _, p := range s.pts {
				fmt.Fprintf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", sx(p[0]), sy(p[1]), col)
			}
		}
		ly := chartH + i*legendLineH + 4
		fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
			padL, ly, col, padL+16, ly+9, e(s.name))
	}
	fmt.Fprint(w, "</svg>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 1:
		return fmt.Sprintf("%.4g", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
