// Command usersd serves the users resource over gRPC, gRPC-Web, Connect and REST on one port.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, again := stopSignals()
	if err := run(ctx, again, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "usersd:", err)
		os.Exit(1)
	}
}

// stopSignals turns SIGINT and SIGTERM into run's two stops: the first ends the returned context,
// and run drains; every later one is sent on the channel, and run stops waiting for the drain (the
// usual "press Ctrl-C again to force"). Each signal stays caught, so none kills the process
// before run has closed the store.
func stopSignals() (context.Context, <-chan os.Signal) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	again := make(chan os.Signal, 1)
	go func() {
		<-signals
		cancel()
		for sig := range signals {
			select {
			case again <- sig:
			default: // run has one waiting already: more say nothing new
			}
		}
	}()
	return ctx, again
}
