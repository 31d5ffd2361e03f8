package main

import (
	"math/bits"
	"time"
)

// hist is a log-linear histogram of durations in microseconds: exact below 64 µs, then 32 buckets
// for each power of two (at most about 3% off). One watcher or writer owns each; they are merged
// at the end.
type hist struct {
	counts [histBuckets]uint32
	n      int64
	max    time.Duration
}

const histBuckets = 64 + 40*32

func histIndex(us uint64) int {
	if us < 64 {
		return int(us)
	}
	shift := bits.Len64(us) - 6 // us>>shift is in [32, 63]
	i := 64 + (shift-1)*32 + int(us>>shift) - 32
	return min(i, histBuckets-1)
}

// histUpper is the largest value in bucket i, in microseconds.
func histUpper(i int) uint64 {
	if i < 64 {
		return uint64(i)
	}
	shift := (i-64)/32 + 1
	m := uint64((i-64)%32 + 32)
	return (m+1)<<shift - 1
}

// add records d; a negative d counts as 0.
func (h *hist) add(d time.Duration) {
	d = max(d, 0)
	h.counts[histIndex(uint64(d/time.Microsecond))]++
	h.n++
	h.max = max(h.max, d)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile is the upper bound of the bucket that holds quantile q (0 < q < 1), or the exact
// maximum when that is smaller.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			return min(time.Duration(histUpper(i))*time.Microsecond, h.max)
		}
	}
	return h.max
}
