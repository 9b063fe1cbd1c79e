// A worker for the demo's order workflow (test/demo/order.json).
//
//	PGDATABASE=shop go run ./example     (stop with Ctrl-C or SIGTERM)
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	worker "wfengine/worker"
)

func main() {
	w := &worker.Worker{
		Queues: []string{"payments", "warehouse", "email"}, Concurrency: 4, Lease: 30 * time.Second, Wait: 10 * time.Second,
		Handlers: map[string]worker.Handler{
			"charge_card": func(ctx context.Context, t *worker.Task) (interface{}, error) {
				return map[string]string{"charge_id": "ch_" + t.IdempotencyKey, "status": "captured"}, nil
			},
			"reserve_stock": func(ctx context.Context, t *worker.Task) (interface{}, error) {
				return map[string]string{"reservation_id": "rsv_" + t.IdempotencyKey}, nil
			},
			"send_receipt": func(ctx context.Context, t *worker.Task) (interface{}, error) {
				return map[string]string{"message_id": fmt.Sprintf("msg_%d@demo.invalid", t.TaskID)}, nil
			},
		},
	}
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
