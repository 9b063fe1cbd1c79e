package worker

// The options every library shares (docs/workers.md), checked without a
// server: Run's refusals, the handler chosen for a task, and how a
// handler's outcome is reported.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOptionsRefused(t *testing.T) {
	h := func(context.Context, *Task) (interface{}, error) { return nil, nil }
	for i, c := range []struct {
		w    *Worker
		want string
	}{
		{&Worker{Handler: h}, "at least one queue"},
		{&Worker{Queues: []string{"q"}}, "needs a handler"},
		{&Worker{Queues: []string{"q"}, Handler: h, Lease: 30}, "Lease is 30ns, less than a millisecond"},
		{&Worker{Queues: []string{"q"}, Handler: h, Wait: 10}, "write 30*time.Second"},
		{&Worker{Queues: []string{"q"}, Handler: h, Heartbeat: 5}, "Heartbeat is 5ns"},
		{&Worker{Queues: []string{"q"}, Handler: h, DrainTimeout: -time.Second}, "DrainTimeout is -1s"},
	} {
		// Run refuses before it connects: no server is needed
		err := c.w.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NOT OK Run refuses case %d with %q: %v", i, c.want, err)
		}
	}
	w := Worker{Queues: []string{"q"}, Handler: h, Lease: time.Millisecond}
	if err := w.check(); err != nil {
		t.Errorf("NOT OK a lease of 1 ms is accepted: %v", err)
	}
}

func TestHandlerChoice(t *testing.T) {
	named := func(s string) Handler {
		return func(context.Context, *Task) (interface{}, error) { return s, nil }
	}
	act := "a"
	w := &Worker{Handlers: map[string]Handler{"a": named("by activity"), "q": named("by queue")}}
	w.defaults()
	run := func(activity *string, queue string) (interface{}, error) {
		return w.runHandler(context.Background(), &Task{Activity: activity, Queue: queue})
	}
	if out, _ := run(&act, "q"); out != "by activity" {
		t.Errorf("NOT OK a task goes by its activity: %v", out)
	}
	if out, _ := run(nil, "q"); out != "by queue" {
		t.Errorf("NOT OK a step without activity goes by its queue: %v", out)
	}
	other := "other"
	_, err := run(&other, "q")
	var f *TaskFailure
	if !errors.As(err, &f) || f.Code != "unknown_activity" || !f.NonRetryable {
		t.Errorf("NOT OK no handler: unknown_activity, not retryable: %#v", err)
	}
	w.Handler = named("catch-all")
	if out, _ := run(&other, "q"); out != "catch-all" {
		t.Errorf("NOT OK Handler is the catch-all: %v", out)
	}
	if out, _ := run(&act, "q"); out != "by activity" {
		t.Errorf("NOT OK Handlers come before the catch-all: %v", out)
	}
	w.Handlers["p"] = func(context.Context, *Task) (interface{}, error) { panic("boom") }
	p := "p"
	if _, err := run(&p, "q"); err == nil || errors.As(err, &f) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("NOT OK a panic is an error (code exception): %v", err)
	}
	if (&TaskFailure{Code: "x"}).NonRetryable {
		t.Errorf("NOT OK the zero TaskFailure is retryable")
	}
}
