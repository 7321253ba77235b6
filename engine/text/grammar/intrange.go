package grammar

import (
	"math"
	"strconv"
	"strings"
)

// buildMinMaxInt writes an alternation matching the decimal integers in
// [minValue, maxValue]; math.MinInt64 and math.MaxInt64 mean no bound. It
// is build_min_max_int of the C++, digit class by digit class; decimalsLeft
// caps the digits of an unbounded side (16, as for number).
func buildMinMaxInt(minValue, maxValue int64, out *strings.Builder, decimalsLeft int, topLevel bool) {
	hasMin := minValue != math.MinInt64
	hasMax := maxValue != math.MaxInt64

	digitRange := func(from, to byte) {
		out.WriteByte('[')
		out.WriteByte(from)
		if from != to {
			out.WriteByte('-')
			out.WriteByte(to)
		}
		out.WriteByte(']')
	}
	moreDigits := func(minDigits, maxDigits int) {
		out.WriteString("[0-9]")
		if minDigits == maxDigits && minDigits == 1 {
			return
		}
		out.WriteString("{" + strconv.Itoa(minDigits))
		if maxDigits != minDigits {
			out.WriteByte(',')
			if maxDigits != math.MaxInt {
				out.WriteString(strconv.Itoa(maxDigits))
			}
		}
		out.WriteByte('}')
	}
	var uniformRange func(from, to string)
	uniformRange = func(from, to string) {
		i := 0
		for i < len(from) && i < len(to) && from[i] == to[i] {
			i++
		}
		if i > 0 {
			out.WriteString(`"` + from[:i] + `"`)
		}
		if i < len(from) && i < len(to) {
			if i > 0 {
				out.WriteByte(' ')
			}
			subLen := len(from) - i - 1
			if subLen > 0 {
				fromSub, toSub := from[i+1:], to[i+1:]
				zeros, nines := strings.Repeat("0", subLen), strings.Repeat("9", subLen)
				toReached := false
				out.WriteByte('(')
				if fromSub == zeros {
					digitRange(from[i], to[i]-1)
					out.WriteByte(' ')
					moreDigits(subLen, subLen)
				} else {
					out.WriteString("[" + from[i:i+1] + "] (")
					uniformRange(fromSub, nines)
					out.WriteByte(')')
					if from[i] < to[i]-1 {
						out.WriteString(" | ")
						if toSub == nines {
							digitRange(from[i]+1, to[i])
							toReached = true
						} else {
							digitRange(from[i]+1, to[i]-1)
						}
						out.WriteByte(' ')
						moreDigits(subLen, subLen)
					}
				}
				if !toReached {
					out.WriteString(" | ")
					digitRange(to[i], to[i])
					out.WriteByte(' ')
					uniformRange(zeros, toSub)
				}
				out.WriteByte(')')
			} else {
				out.WriteString("[" + from[i:i+1] + "-" + to[i:i+1] + "]")
			}
		}
	}

	if hasMin && hasMax {
		if minValue < 0 && maxValue < 0 {
			out.WriteString(`"-" (`)
			buildMinMaxInt(-maxValue, -minValue, out, decimalsLeft, true)
			out.WriteByte(')')
			return
		}
		if minValue < 0 {
			out.WriteString(`"-" (`)
			buildMinMaxInt(0, -minValue, out, decimalsLeft, true)
			out.WriteString(") | ")
			minValue = 0
		}
		minS, maxS := strconv.FormatInt(minValue, 10), strconv.FormatInt(maxValue, 10)
		for digits := len(minS); digits < len(maxS); digits++ {
			uniformRange(minS, strings.Repeat("9", digits))
			minS = "1" + strings.Repeat("0", digits)
			out.WriteString(" | ")
		}
		uniformRange(minS, maxS)
		return
	}

	lessDecimals := max(decimalsLeft-1, 1)

	if hasMin {
		switch {
		case minValue < 0:
			out.WriteString(`"-" (`)
			buildMinMaxInt(math.MinInt64, -minValue, out, decimalsLeft, false)
			out.WriteString(") | [0] | [1-9] ")
			moreDigits(0, decimalsLeft-1)
		case minValue == 0:
			if topLevel {
				out.WriteString("[0] | [1-9] ")
				moreDigits(0, lessDecimals)
			} else {
				moreDigits(1, decimalsLeft)
			}
		case minValue <= 9:
			c := byte('0' + minValue)
			rangeStart := byte('0')
			if topLevel {
				rangeStart = '1'
			}
			if c > rangeStart {
				digitRange(rangeStart, c-1)
				out.WriteByte(' ')
				moreDigits(1, lessDecimals)
				out.WriteString(" | ")
			}
			digitRange(c, '9')
			out.WriteByte(' ')
			moreDigits(0, lessDecimals)
		default:
			minS := strconv.FormatInt(minValue, 10)
			c := minS[0]
			if c > '1' {
				start := byte('0')
				if topLevel {
					start = '1'
				}
				digitRange(start, c-1)
				out.WriteByte(' ')
				moreDigits(len(minS), lessDecimals)
				out.WriteString(" | ")
			}
			digitRange(c, c)
			out.WriteString(" (")
			rest, _ := strconv.ParseInt(minS[1:], 10, 64)
			buildMinMaxInt(rest, math.MaxInt64, out, lessDecimals, false)
			out.WriteByte(')')
			if c < '9' {
				out.WriteString(" | ")
				digitRange(c+1, '9')
				out.WriteByte(' ')
				moreDigits(len(minS)-1, lessDecimals)
			}
		}
		return
	}

	// hasMax only (the caller never passes neither).
	if maxValue >= 0 {
		if topLevel {
			out.WriteString(`"-" [1-9] `)
			moreDigits(0, lessDecimals)
			out.WriteString(" | ")
		}
		buildMinMaxInt(0, maxValue, out, decimalsLeft, true)
	} else {
		out.WriteString(`"-" (`)
		buildMinMaxInt(-maxValue, math.MaxInt64, out, decimalsLeft, false)
		out.WriteByte(')')
	}
}
