package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Figure is one number compared between two servers.
type Figure struct {
	Name        string    `json:"name"`
	Unit        string    `json:"unit"`
	LowerBetter bool      `json:"lower_is_better"`
	A           float64   `json:"a"`      // median over rounds
	B           float64   `json:"b"`      // median over rounds
	Ratio       float64   `json:"ratio"`  // median of the per-round B/A ratios
	Ratios      []float64 `json:"ratios"` // per round
}

// Comparison is the outcome of Compare; it is what -out writes with -compare.
type Comparison struct {
	Rounds  int       `json:"rounds"`
	A       []*Result `json:"a"`
	B       []*Result `json:"b"`
	Figures []Figure  `json:"figures"`
}

// Errors returns the failed measured requests of all runs.
func (c *Comparison) Errors() int64 {
	var n int64
	for _, r := range append(append([]*Result(nil), c.A...), c.B...) {
		n += r.Errors
	}
	return n
}

// figureDefs lists the compared figures; a NaN value means "not measured".
// figureDef is how one compared figure is read from a run.
type figureDef struct {
	name, unit string
	lower      bool
	get        func(*Result) float64
}

var figureDefs = []figureDef{
	{"tokens/s", "tok/s", false, func(r *Result) float64 { return r.TokensPerSec }},
	{"requests/s", "req/s", false, func(r *Result) float64 {
		if r.Requests+r.Errors == 0 {
			return math.NaN() // nothing measured: the window is shorter than a request
		}
		return r.RequestsPerSec
	}},
	{"ttft p50", "ms", true, func(r *Result) float64 {
		if r.TTFT.Count == 0 {
			return math.NaN()
		}
		return r.TTFT.P50
	}},
	{"ttft p99", "ms", true, func(r *Result) float64 {
		if r.TTFT.Count == 0 {
			return math.NaN()
		}
		return r.TTFT.P99
	}},
	{"gap p50", "ms", true, func(r *Result) float64 {
		if r.Gap.Count == 0 {
			return math.NaN()
		}
		return r.Gap.P50
	}},
	{"gap p99", "ms", true, func(r *Result) float64 {
		if r.Gap.Count == 0 {
			return math.NaN()
		}
		return r.Gap.P99
	}},
	{"gap p99.9", "ms", true, func(r *Result) float64 {
		if r.Gap.Count == 0 {
			return math.NaN()
		}
		return r.Gap.P999
	}},
	{"gap-itl p99", "ms", true, func(r *Result) float64 {
		if r.Gap.Count == 0 {
			return math.NaN()
		}
		return r.ServerAdded.P99
	}},
	{"e2e p50", "ms", true, func(r *Result) float64 {
		if r.E2E.Count == 0 {
			return math.NaN()
		}
		return r.E2E.P50
	}},
	{"e2e p99", "ms", true, func(r *Result) float64 {
		if r.E2E.Count == 0 {
			return math.NaN()
		}
		return r.E2E.P99
	}},
	{"server cpu/token", "µs", true, func(r *Result) float64 {
		if r.Server == nil || r.Server.CPUSource == "" {
			return math.NaN()
		}
		return r.Server.CPUMicrosPerTok
	}},
	{"server cpu/request", "µs", true, func(r *Result) float64 {
		if r.Server == nil || r.Server.CPUSource == "" || r.RequestsPerSec == 0 {
			return math.NaN() // no request ended in the window
		}
		return r.Server.CPUMicrosPerReq
	}},
	{"server allocs/token", "", true, func(r *Result) float64 {
		if r.Server == nil || r.Server.AllocsPerToken < 0 {
			return math.NaN()
		}
		return r.Server.AllocsPerToken
	}},
	{"server peak RSS", "MiB", true, func(r *Result) float64 {
		if r.Server == nil {
			return math.NaN()
		}
		return float64(r.Server.PeakRSSBytes) / (1 << 20)
	}},
	{"errors", "", true, func(r *Result) float64 { return float64(r.Errors) }},
}

// Compare runs cfgA and cfgB in alternation, A B A B..., rounds times, so
// that drift in the machine's speed hits both alike, and returns each
// figure's medians and the median of the per-round B/A ratios. progress,
// when non-nil, gets a line per run.
func Compare(ctx context.Context, cfgA, cfgB Config, rounds int, progress io.Writer) (*Comparison, error) {
	if rounds < 1 || rounds > 1000 {
		return nil, fmt.Errorf("%w: -rounds %d outside [1, 1000]", ErrConfig, rounds)
	}
	if cfgA.Label == "" {
		cfgA.Label = "A"
	}
	if cfgB.Label == "" {
		cfgB.Label = "B"
	}
	c := &Comparison{Rounds: rounds}
	for i := 0; i < rounds; i++ {
		for _, side := range []struct {
			cfg Config
			out *[]*Result
		}{{cfgA, &c.A}, {cfgB, &c.B}} {
			if progress != nil {
				fmt.Fprintf(progress, "-- round %d/%d: %s (%s)\n", i+1, rounds, side.cfg.Label, side.cfg.URL)
			}
			res, err := Run(ctx, side.cfg)
			if res != nil {
				*side.out = append(*side.out, res)
				if progress != nil {
					res.WriteText(progress)
				}
			}
			if err != nil {
				c.summarise()
				return c, err
			}
		}
	}
	c.summarise()
	return c, nil
}

// minSyscallsPerToken is the least per-token rate of a kind of system call
// that the text reports and the comparison's figures show (the JSON has
// every kind).
const minSyscallsPerToken = 0.0005

// syscallKindFigure starts the name of a kind's figure.
const syscallKindFigure = "syscalls/token "

// syscallFigures are the figures of the system calls per token (with
// -syscalls): the total and one per kind that either side made.
func syscallFigures(results ...[]*Result) []figureDef {
	perKind := func(name string) func(*Result) float64 {
		return func(r *Result) float64 {
			if r.Server == nil || r.Server.Syscalls == nil || r.Server.Syscalls.PerToken < 0 {
				return math.NaN()
			}
			if name == "" {
				return r.Server.Syscalls.PerToken
			}
			for _, k := range r.Server.Syscalls.Kinds {
				if k.Name == name {
					return k.PerToken
				}
			}
			return 0 // counted, and none of this kind
		}
	}
	var defs []figureDef
	seen := map[string]bool{}
	for _, rs := range results {
		for _, r := range rs {
			if r.Server == nil || r.Server.Syscalls == nil {
				continue
			}
			if len(defs) == 0 {
				defs = append(defs, figureDef{"server syscalls/token", "", true, perKind("")})
			}
			for _, k := range r.Server.Syscalls.Kinds {
				if !seen[k.Name] {
					seen[k.Name] = true
					defs = append(defs, figureDef{syscallKindFigure + k.Name, "", true, perKind(k.Name)})
				}
			}
		}
	}
	return defs
}

func (c *Comparison) summarise() {
	n := min(len(c.A), len(c.B))
	c.Figures = c.Figures[:0]
	for _, fd := range append(append([]figureDef(nil), figureDefs...), syscallFigures(c.A, c.B)...) {
		f := Figure{Name: fd.name, Unit: fd.unit, LowerBetter: fd.lower}
		var as, bs []float64
		for i := 0; i < n; i++ {
			a, b := fd.get(c.A[i]), fd.get(c.B[i])
			if !math.IsNaN(a) {
				as = append(as, a)
			}
			if !math.IsNaN(b) {
				bs = append(bs, b)
			}
			if !math.IsNaN(a) && !math.IsNaN(b) && a != 0 {
				f.Ratios = append(f.Ratios, b/a)
			}
		}
		if len(as) == 0 && len(bs) == 0 {
			continue
		}
		if strings.HasPrefix(fd.name, syscallKindFigure) && medianOr(as, 0) < minSyscallsPerToken && medianOr(bs, 0) < minSyscallsPerToken {
			continue // a kind of system call neither side makes per token
		}
		// A side that was not measured (allocations of a server without
		// /metrics, say) is -1: JSON has no NaN.
		f.A, f.B = medianOr(as, -1), medianOr(bs, -1)
		if len(f.Ratios) > 0 { // else Ratio stays 0: "undefined" (JSON has no NaN)
			f.Ratio = median(f.Ratios)
		}
		c.Figures = append(c.Figures, f)
	}
}

// medianOr is the median of v, or none when v is empty.
func medianOr(v []float64, none float64) float64 {
	if len(v) == 0 {
		return none
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteText prints the comparison table.
func (c *Comparison) WriteText(w io.Writer) {
	la, lb := "A", "B"
	if len(c.A) > 0 && c.A[0].Label != "" {
		la = c.A[0].Label
	}
	if len(c.B) > 0 && c.B[0].Label != "" {
		lb = c.B[0].Label
	}
	fmt.Fprintf(w, "== comparison over %d rounds: A = %s, B = %s (medians; ratio = median of per-round B/A)\n", c.Rounds, la, lb)
	nameW := 20
	for _, f := range c.Figures {
		nameW = max(nameW, len(figureName(f)))
	}
	fmt.Fprintf(w, "%-*s %14s %14s %9s  %s\n", nameW, "figure", "A", "B", "B/A", "per round")
	for _, f := range c.Figures {
		ratio := "n/a"
		if len(f.Ratios) > 0 {
			ratio = fmt.Sprintf("%.3f", f.Ratio)
		}
		var per string
		for i, r := range f.Ratios {
			if i > 0 {
				per += " "
			}
			per += fmt.Sprintf("%.3f", r)
		}
		fmt.Fprintf(w, "%-*s %14s %14s %9s  %s %s\n", nameW, figureName(f), figureValue(f.A), figureValue(f.B), ratio, per, better(f))
	}
}

// figureName is a figure's name with its unit, if it has one.
func figureName(f Figure) string {
	if f.Unit == "" {
		return f.Name
	}
	return f.Name + " (" + f.Unit + ")"
}

// figureValue prints a figure's value; -1 means not measured.
func figureValue(v float64) string {
	if v == -1 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

func better(f Figure) string {
	if len(f.Ratios) == 0 || f.Ratio == 1 {
		return ""
	}
	if (f.Ratio < 1) == f.LowerBetter {
		return "(B better)"
	}
	return "(A better)"
}
