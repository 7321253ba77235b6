package actors

import (
	"sync/atomic"
	"time"
)

// storeOpKind names a store command for metrics.
type storeOpKind uint8

const (
	opGet storeOpKind = iota
	opPut
	opDelete
	opPublish // a cancel relayed to the node that runs the response
	numStoreOps
)

// StoreOpNames are the metric label values of the store's commands, by
// index of StoreOpStats.Count's first dimension.
var StoreOpNames = [numStoreOps]string{opGet: "get", opPut: "put", opDelete: "delete", opPublish: "publish"}

// storeResult is a command's outcome for metrics.
type storeResult uint8

const (
	resultOK storeResult = iota
	resultError
	resultBusy
	resultTooLarge
	numStoreResults
)

// StoreResultNames are the metric label values of the outcomes, by index
// of StoreOpStats.Count's second dimension: ok, error (Redis unreachable or
// failing), busy (the store's queue was full), too_large (over the entry
// cap, not sent).
var StoreResultNames = [numStoreResults]string{resultOK: "ok", resultError: "error", resultBusy: "busy", resultTooLarge: "too_large"}

// StoreLatencyBuckets are the upper bounds of the store's latency
// histogram, in seconds.
var StoreLatencyBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// StoreOpStats are the store's per-command figures: counts by command and
// outcome, and per command a latency histogram of the commands that
// reached the store (cumulative-free bucket counts, the last one +Inf, and
// the sum in seconds).
type StoreOpStats struct {
	Count   [numStoreOps][numStoreResults]uint64
	Buckets [numStoreOps][len(StoreLatencyBuckets) + 1]uint64
	Sum     [numStoreOps]float64
}

// storeOpStats counts commands with atomics: any store goroutine records.
type storeOpStats struct {
	count   [numStoreOps][numStoreResults]atomic.Uint64
	buckets [numStoreOps][len(StoreLatencyBuckets) + 1]atomic.Uint64
	sumNs   [numStoreOps]atomic.Int64
}

// record counts one command; d is its latency, 0 for one that never
// reached the store (busy, too large).
func (s *storeOpStats) record(op storeOpKind, res storeResult, d time.Duration) {
	s.count[op][res].Add(1)
	if res == resultBusy || res == resultTooLarge {
		return
	}
	sec := d.Seconds()
	i := 0
	for i < len(StoreLatencyBuckets) && sec > StoreLatencyBuckets[i] {
		i++
	}
	s.buckets[op][i].Add(1)
	s.sumNs[op].Add(int64(d))
}

func (s *storeOpStats) snapshot() StoreOpStats {
	var out StoreOpStats
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
func (op storeOp) kind() storeOpKind {
	if op == storeDelete {
		return opDelete
	}
	return opGet
}
