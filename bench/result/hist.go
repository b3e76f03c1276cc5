package result

import (
	"math"
	"time"
)

// Histogram resolution: bucket i holds latencies in
// [2^(i/subBuckets), 2^((i+1)/subBuckets)) microseconds, so a reported
// percentile is within about 1.1% of the true value. Latencies under 1 µs
// land in bucket 0, latencies over 2^(maxBucket/subBuckets) µs (about 18
// minutes) in the last bucket.
const (
	subBuckets = 64
	maxBucket  = 30 * subBuckets
)

// Histogram is a log-bucketed latency histogram, small enough to travel as
// JSON between the driver and the peers' program and to merge exactly.
// The zero value is empty and ready to use; it is not safe for concurrent
// use (each load worker keeps its own and they are merged at the end).
type Histogram struct {
	Count int64 `json:"count"`
	SumNS int64 `json:"sum_ns"`
	MinNS int64 `json:"min_ns"`
	MaxNS int64 `json:"max_ns"`
	// Buckets are the non-empty buckets as [index, count] pairs, in index
	// order. They are filled by Compact and read by the accessors.
	Buckets [][2]int64 `json:"buckets"`

	dense []int64 // while recording: counts by bucket index
}

// bucketOf returns the bucket index of d.
func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	i := int(math.Log2(us) * subBuckets)
	return min(i, maxBucket)
}

// bucketValue is the representative latency of bucket i: the geometric
// middle of its bounds.
func bucketValue(i int) time.Duration {
	us := math.Exp2((float64(i) + 0.5) / subBuckets)
	return time.Duration(us * float64(time.Microsecond))
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	if h.dense == nil {
		h.expand()
	}
	h.dense[bucketOf(d)]++
	if h.Count == 0 || int64(d) < h.MinNS {
		h.MinNS = int64(d)
	}
	if int64(d) > h.MaxNS {
		h.MaxNS = int64(d)
	}
	h.Count++
	h.SumNS += int64(d)
}

// expand moves the sparse Buckets into the dense form used for recording.
func (h *Histogram) expand() {
	h.dense = make([]int64, maxBucket+1)
	for _, b := range h.Buckets {
		h.dense[b[0]] += b[1]
	}
	h.Buckets = nil
}

// Compact moves recorded counts into Buckets, the form that is encoded and
// read. Recording may continue afterwards.
func (h *Histogram) Compact() {
	if h.dense == nil {
		return
	}
	var out [][2]int64
	for i, n := range h.dense {
		if n > 0 {
			out = append(out, [2]int64{int64(i), n})
		}
	}
	h.Buckets, h.dense = out, nil
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.Count == 0 {
		return
	}
	if h.dense == nil {
		h.expand()
	}
	if o.dense != nil {
		for i, n := range o.dense {
			h.dense[i] += n
		}
	} else {
		for _, b := range o.Buckets {
			h.dense[b[0]] += b[1]
		}
	}
	if h.Count == 0 || o.MinNS < h.MinNS {
		h.MinNS = o.MinNS
	}
	h.MaxNS = max(h.MaxNS, o.MaxNS)
	h.Count += o.Count
	h.SumNS += o.SumNS
}

// counts returns (index, count) pairs in index order, from whichever form
// is current.
func (h *Histogram) counts() [][2]int64 {
	if h.dense == nil {
		return h.Buckets
	}
	c := *h
	c.dense = append([]int64(nil), h.dense...)
	c.Compact()
	return c.Buckets
}

// Quantile returns the latency below or at which a fraction q of the
// samples lie (q in [0, 1]); 0 for an empty histogram. The value is the
// middle of its bucket, clamped to the exact minimum and maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	switch {
	case h == nil || h.Count == 0:
		return 0
	case q <= 0:
		return time.Duration(h.MinNS)
	case q >= 1:
		return time.Duration(h.MaxNS)
	}
	rank := int64(math.Ceil(q * float64(h.Count)))
	rank = max(rank, 1)
	var seen int64
	for _, b := range h.counts() {
		seen += b[1]
		if seen >= rank {
			v := bucketValue(int(b[0]))
			return min(max(v, time.Duration(h.MinNS)), time.Duration(h.MaxNS))
		}
	}
	return time.Duration(h.MaxNS)
}

// Mean is the exact mean latency; 0 for an empty histogram.
func (h *Histogram) Mean() time.Duration {
	if h == nil || h.Count == 0 {
		return 0
	}
	return time.Duration(h.SumNS / h.Count)
}

// CDF returns (latency, fraction at or below it) points, one per non-empty
// bucket, for plotting.
func (h *Histogram) CDF() []Point {
	if h == nil || h.Count == 0 {
		return nil
	}
	var pts []Point
	var seen int64
	for _, b := range h.counts() {
		seen += b[1]
		v := min(max(bucketValue(int(b[0])), time.Duration(h.MinNS)), time.Duration(h.MaxNS))
		pts = append(pts, Point{X: float64(v) / float64(time.Millisecond), Y: float64(seen) / float64(h.Count)})
	}
	return pts
}

// Point is one point of a chart.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}
