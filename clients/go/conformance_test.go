package worker

// TestConformance: this library's driver of the shared conformance scenario
// (test/conformance/README.md).  It runs only under the harness
// (test/conformance/run.sh sets WF_CONFORMANCE=1 after it has published the
// definition and started the runs); the harness compares the runs' history
// with the one expected file.

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v4"
)

func TestConformance(t *testing.T) {
	if os.Getenv("WF_CONFORMANCE") == "" {
		t.Skip("run by test/conformance/run.sh")
	}
	out := func(handler string, task *Task) map[string]interface{} {
		return map[string]interface{}{"handler": handler, "attempt": task.Attempt}
	}
	w := &Worker{
		Queues: []string{"conf_main", "conf_plain"}, Name: "conformance-go",
		Lease: 30 * time.Second, Wait: time.Second,
		Handlers: map[string]Handler{
			"conf_echo": func(_ context.Context, task *Task) (interface{}, error) {
				return out("echo", task), nil
			},
			"conf_plain": func(_ context.Context, task *Task) (interface{}, error) { // by queue
				return out("plain", task), nil
			},
			"conf_flaky": func(_ context.Context, task *Task) (interface{}, error) {
				if task.Attempt == 1 {
					return nil, &TaskFailure{Code: "flaky", Message: "the first attempt fails"}
				}
				return out("flaky", task), nil
			},
			"conf_throw": func(_ context.Context, task *Task) (interface{}, error) {
				if task.Attempt == 1 {
					return nil, errors.New("the first attempt throws")
				}
				return out("throw", task), nil
			},
			"conf_permanent": func(_ context.Context, task *Task) (interface{}, error) {
				return nil, &TaskFailure{Code: "permanent", Message: "retrying cannot help", NonRetryable: true}
			},
			"conf_undo": func(_ context.Context, task *Task) (interface{}, error) {
				return out("undo", task), nil
			},
		},
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan bool, 1)
	go func() { // wf_conformance_poll(): one tick, and whether every run has ended
		admin, err := pgx.Connect(ctx, "")
		if err != nil {
			t.Error(err)
			done <- false
			stop()
			return
		}
		defer admin.Close(context.Background())
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var ended bool
			if err := admin.QueryRow(ctx, "SELECT wf_conformance_poll()").Scan(&ended); err != nil {
				t.Error(err)
				break
			} else if ended {
				done <- true
				stop()
				return
			}
		}
		done <- false
		stop()
	}()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("the runs did not end within 60 s")
	}
}
