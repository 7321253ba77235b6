package store

import (
	"sync/atomic"
	"time"
)

// opKind names a store command for metrics.
type opKind uint8

const (
	opGet opKind = iota
	opPut
	opDelete
	opPublish // a cancel relayed to the node that runs the response
	numStoreOps
)

// OpNames are the metric label values of the store's commands, by
// index of OpStats.Count's first dimension.
var OpNames = [numStoreOps]string{opGet: "get", opPut: "put", opDelete: "delete", opPublish: "publish"}

// result is a command's outcome for metrics.
type result uint8

const (
	resultOK result = iota
	resultError
	resultBusy
	resultTooLarge
	numStoreResults
)

// ResultNames are the metric label values of the outcomes, by index
// of OpStats.Count's second dimension: ok, error (Redis unreachable or
// failing), busy (the store's queue was full), too_large (over the entry
// cap, not sent).
var ResultNames = [numStoreResults]string{resultOK: "ok", resultError: "error", resultBusy: "busy", resultTooLarge: "too_large"}

// LatencyBuckets are the upper bounds of the store's latency
// histogram, in seconds.
var LatencyBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// OpStats are the store's per-command figures: counts by command and
// outcome, and per command a latency histogram of the commands that
// reached the store (cumulative-free bucket counts, the last one +Inf, and
// the sum in seconds).
type OpStats struct {
	Count   [numStoreOps][numStoreResults]uint64
	Buckets [numStoreOps][len(LatencyBuckets) + 1]uint64
	Sum     [numStoreOps]float64
}

// opStats counts commands with atomics: any store goroutine records.
type opStats struct {
	count   [numStoreOps][numStoreResults]atomic.Uint64
	buckets [numStoreOps][len(LatencyBuckets) + 1]atomic.Uint64
	sumNs   [numStoreOps]atomic.Int64
}

// record counts one command; d is its latency, 0 for one that never
// reached the store (busy, too large).
func (s *opStats) record(op opKind, res result, d time.Duration) {
	s.count[op][res].Add(1)
	if res == resultBusy || res == resultTooLarge {
		return
	}
	sec := d.Seconds()
	i := 0
	for i < len(LatencyBuckets) && sec > LatencyBuckets[i] {
		i++
	}
	s.buckets[op][i].Add(1)
	s.sumNs[op].Add(int64(d))
}

func (s *opStats) snapshot() OpStats {
	var out OpStats
	for op := range numStoreOps {
		for r := range numStoreResults {
			out.Count[op][r] = s.count[op][r].Load()
		}
		for b := range out.Buckets[op] {
			out.Buckets[op][b] = s.buckets[op][b].Load()
		}
		out.Sum[op] = time.Duration(s.sumNs[op].Load()).Seconds()
	}
	return out
}

// kind is the metric name of a request's command.
func (op Op) kind() opKind {
	if op == Delete {
		return opDelete
	}
	return opGet
}
