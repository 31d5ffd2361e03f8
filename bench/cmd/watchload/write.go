package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
)

// writeResult is what the writers did in one phase.
type writeResult struct {
	planned, acked, failed int
	skipped                int            // due, but not started before the pace's end (see drive)
	failures               map[string]int // by RPC code
	latency                hist           // of the acknowledged creates, send to answer
	maxLag                 time.Duration  // how far behind its schedule a create was sent, at most
	first, lastAck         time.Time
}

// drive creates total users at rate a second, paced by a ticker from start: each tick hands out the
// writes that are due by then, so a late tick is caught up. concurrency writers send them; each
// write's answer time goes into acks. The user's name holds the write's index and the time it was
// sent. A server that cannot keep up makes the writes queue; those not started by the end of the
// pace (total / rate after the start) are skipped, so that an overloaded phase still ends on time.
func drive(ctx context.Context, client usersv1connect.UsersClient, total int, rate float64, concurrency int, acks []atomic.Int64) writeResult {
	interval := time.Duration(float64(time.Second) / rate)
	jobs := make(chan int, total)
	type part struct {
		acked, failed, skipped int
		failures               map[string]int
		latency                hist
		maxLag                 time.Duration
		lastAck                time.Time
	}
	parts := make([]part, concurrency)
	start := time.Now()
	paceEnd := start.Add(time.Duration(total) * interval)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			r := &parts[p]
			r.failures = map[string]int{}
			for i := range jobs {
				sent := time.Now()
				if sent.After(paceEnd) || ctx.Err() != nil {
					r.skipped++
					continue
				}
				r.maxLag = max(r.maxLag, sent.Sub(start.Add(time.Duration(i)*interval)))
				callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := client.CreateUser(callCtx, &usersv1.CreateUserRequest{
					User: &usersv1.User{Name: writeName(i, sent), Role: "viewer"},
				})
				cancel()
				answered := time.Now()
				if err != nil {
					r.failed++
					r.failures[connect.CodeOf(err).String()]++
					continue
				}
				acks[i].Store(answered.UnixNano())
				r.acked++
				r.latency.add(answered.Sub(sent))
				r.lastAck = answered
			}
		})
	}
	ticker := time.NewTicker(interval)
	next := 0
	jobs <- next // the first write goes at start
	next++
	for next < total && ctx.Err() == nil {
		<-ticker.C
		due := min(total, int(time.Since(start)/interval)+1)
		for ; next < due; next++ {
			jobs <- next
		}
	}
	ticker.Stop()
	close(jobs)
	wg.Wait()
	res := writeResult{planned: next, failures: map[string]int{}, first: start}
	for _, r := range parts {
		res.acked += r.acked
		res.failed += r.failed
		res.skipped += r.skipped
		for code, n := range r.failures {
			res.failures[code] += n
		}
		res.latency.merge(&r.latency)
		res.maxLag = max(res.maxLag, r.maxLag)
		if r.lastAck.After(res.lastAck) {
			res.lastAck = r.lastAck
		}
	}
	return res
}
