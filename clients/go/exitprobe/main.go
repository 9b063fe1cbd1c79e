// exitprobe: a worker of queue "exitprobe" for test/scripts/client_exit.sh
// (issue 32: does the process stop on SIGTERM?).  Its handler holds each
// task WF_PROBE_HOLD seconds, giving up (failing the attempt) when its
// context is cancelled; the drain timeout is WF_PROBE_DRAIN seconds.
// Connects with the libpq environment; runs until SIGTERM.
package main

import (
	"context"
	"log"
	"os"
	"strconv"
	"time"

	worker "wfengine/worker"
)

func seconds(name, def string) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	return time.Duration(f * float64(time.Second))
}

func main() {
	hold := seconds("WF_PROBE_HOLD", "2")
	w := &worker.Worker{
		Queues: []string{"exitprobe"}, Name: "exitprobe", Concurrency: 2, Lease: 30 * time.Second, Wait: 10 * time.Second,
		DrainTimeout: seconds("WF_PROBE_DRAIN", "5"),
		Handler: func(ctx context.Context, t *worker.Task) (interface{}, error) {
			select {
			case <-time.After(hold):
				return map[string]float64{"held": hold.Seconds()}, nil
			case <-ctx.Done():
				return nil, &worker.TaskFailure{Code: "cancelled", Message: "given up at shutdown"}
			}
		},
	}
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
