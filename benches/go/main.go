// Command go is the Go twin of benches/benches/channel.rs: the same channel shapes, item counts
// and checks, on Go's runtime with GOMAXPROCS=2 (the Rust benches' WORKERS), standard library
// only. It is a measuring tool, not part of the build: nothing in the workspace or CI needs Go.
//
// Rule: every shape here does what its namesake in channel.rs does, and checks the same total,
// so that coro / Go compares one program's work with the other's. Where Go has no such
// channel, the stand-in is named in the shape's comment (`mpmc_unbounded`).
//
// Each shape warms up for -warm-up, then runs iterations for -measurement, timing each
// iteration alone; it prints one JSON line per shape with the median and the spread of the
// per-iteration times (benches/go_ratios.py reads them).
//
//	cd benches/go && go run . [-shape REGEXP] [-warm-up 1s] [-measurement 3s]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"time"
)

const (
	// workers is the Rust benches' WORKERS: threads running goroutines at once.
	workers = 2
	// roundTrips per iteration of ping_pong (channel.rs ROUND_TRIPS).
	roundTrips = 1_000
	// producers and consumers of the mpmc shapes (PRODUCERS, CONSUMERS).
	producers = 4
	consumers = 4
	// mpmcMessages per iteration of the mpmc shapes, over all producers (MPMC_MESSAGES).
	mpmcMessages = 1_000_000
	// mpmcCapacity of mpmc_bounded's channel (MPMC_CAPACITY).
	mpmcCapacity = 1024
	// pipelineItems per iteration of pipeline (PIPELINE_ITEMS).
	pipelineItems = 100_000
	// pipelineCapacity of each of pipeline's two channels (PIPELINE_CAPACITY).
	pipelineCapacity = 128
)

// pingPong bounces a value between the root and a spawned goroutine over two channels of
// capacity 1, roundTrips times; returns the last value (each pong adds one).
func pingPong() uint64 {
	ping := make(chan uint64, 1)
	pong := make(chan uint64, 1)
	done := make(chan struct{})
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(done)
	}()
	var value uint64
	for i := 0; i < roundTrips; i++ {
		ping <- value
		value = <-pong
	}
	close(ping)
	<-done
	return value
}

// mpmc: producers send 0..mpmcMessages between them through one channel of capacity
// `capacity`, consumers sum; returns the consumers' total.
func mpmc(capacity int) uint64 {
	ch := make(chan uint64, capacity)
	sums := make(chan uint64, consumers)
	for c := 0; c < consumers; c++ {
		go func() {
			var sum uint64
			for v := range ch {
				sum += v
			}
			sums <- sum
		}()
	}
	var sent sync.WaitGroup
	per := uint64(mpmcMessages / producers)
	for p := uint64(0); p < producers; p++ {
		sent.Add(1)
		go func(p uint64) {
			defer sent.Done()
			for v := p * per; v < (p+1)*per; v++ {
				ch <- v
			}
		}(p)
	}
	// The channel closes when the last producer is done.
	sent.Wait()
	close(ch)
	var total uint64
	for c := 0; c < consumers; c++ {
		total += <-sums
	}
	return total
}

// pipeline: three goroutines joined by two channels of capacity pipelineCapacity pass
// 0..pipelineItems, mapped by x*2+1, summed; returns the sum.
func pipeline() uint64 {
	source := make(chan uint64, pipelineCapacity)
	mapped := make(chan uint64, pipelineCapacity)
	sum := make(chan uint64)
	go func() {
		for v := uint64(0); v < pipelineItems; v++ {
			source <- v
		}
		close(source)
	}()
	go func() {
		for v := range source {
			mapped <- v*2 + 1
		}
		close(mapped)
	}()
	go func() {
		var s uint64
		for v := range mapped {
			s += v
		}
		sum <- s
	}()
	return <-sum
}

// shape is one bench: run does one iteration on a goroutine of its own (as the Rust root task
// runs on a worker while the bench thread waits) and panics if its check fails.
type shape struct {
	name string
	run  func()
}

func check(what string, got, want uint64) {
	if got != want {
		panic(fmt.Sprintf("%s: got %d, want %d", what, got, want))
	}
}

var shapes = []shape{
	{"ping_pong", func() { check("ping_pong", pingPong(), roundTrips) }},
	{"mpmc_bounded", func() {
		check("mpmc_bounded", mpmc(mpmcCapacity), mpmcMessages*(mpmcMessages-1)/2)
	}},
	// Go has no unbounded channel: a buffer with room for every message, made in each
	// iteration, is the stand-in (no send ever waits, as with an unbounded channel).
	{"mpmc_unbounded", func() {
		check("mpmc_unbounded", mpmc(mpmcMessages), mpmcMessages*(mpmcMessages-1)/2)
	}},
	{"pipeline", func() { check("pipeline", pipeline(), pipelineItems*pipelineItems) }},
}

// result is one shape's printed line.
type result struct {
	Shape      string  `json:"shape"`
	Iterations int     `json:"iterations"`
	MedianNs   float64 `json:"median_ns"`
	MinNs      float64 `json:"min_ns"`
	MaxNs      float64 `json:"max_ns"`
}

// once runs one iteration of s as a root goroutine and returns how long it took.
func once(s shape) time.Duration {
	done := make(chan struct{})
	start := time.Now()
	go func() {
		s.run()
		close(done)
	}()
	<-done
	return time.Since(start)
}

func measure(s shape, warmUp, measurement time.Duration) result {
	for end := time.Now().Add(warmUp); time.Now().Before(end); {
		once(s)
	}
	var times []float64
	for end := time.Now().Add(measurement); time.Now().Before(end) || len(times) < 10; {
		times = append(times, float64(once(s).Nanoseconds()))
	}
	sort.Float64s(times)
	n := len(times)
	median := times[n/2]
	if n%2 == 0 {
		median = (times[n/2-1] + times[n/2]) / 2
	}
	return result{s.name, n, median, times[0], times[n-1]}
}

func main() {
	filter := flag.String("shape", "", "run only the shapes whose name matches this regexp")
	warmUp := flag.Duration("warm-up", time.Second, "warm-up time per shape")
	measurement := flag.Duration("measurement", 3*time.Second, "measurement time per shape")
	flag.Parse()
	pattern, err := regexp.Compile(*filter)
	if err != nil {
		fmt.Fprintf(os.Stderr, "-shape %q is not a regexp: %v\n", *filter, err)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(workers)
	out := json.NewEncoder(os.Stdout)
	for _, s := range shapes {
		if pattern.MatchString(s.name) {
			if err := out.Encode(measure(s, *warmUp, *measurement)); err != nil {
				panic(err)
			}
		}
	}
}
