package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

func (h *historyBuilder) armExec() *historyBuilder {
	return h.add(eventstore.TimerScheduled{TimerID: execTimerID(1, 0), FireAt: h.at.Add(time.Minute)})
}

func (h *historyBuilder) complete(id eventstore.ActivityID) *historyBuilder {
	return h.add(eventstore.ActivityCompleted{ActivityID: id, Attempt: 1})
}

func (h *historyBuilder) failTerminal(id eventstore.ActivityID) *historyBuilder {
	return h.add(eventstore.ActivityFailed{ActivityID: id, Attempt: 1, Error: eventstore.ActivityError{Kind: eventstore.Terminal}})
}

func (h *historyBuilder) signal(name string) *historyBuilder {
	return h.add(eventstore.SignalReceived{SignalName: name})
}

func (h *historyBuilder) fire(id eventstore.TimerID) *historyBuilder {
	return h.add(eventstore.TimerFired{TimerID: id})
}

// kinds names the event kinds of a batch, for comparison.
func kinds(events []eventstore.Event) string {
	names := make([]string, len(events))
	for i, ev := range events {
		names[i] = strings.TrimPrefix(fmt.Sprintf("%T", ev), "eventstore.")
	}
	return strings.Join(names, ",")
}

// checkoutPaid is a checkout that reserved, charged and got paid: it is about
// to ship.
func checkoutPaid() *historyBuilder {
	return newHistory(typeCheckout).armExec().
		schedule(0, "reserve_inventory", 0, 0).complete(0).
		schedule(1, "charge_card", 1, 0).complete(1).
		signal(signalPayment)
}

// reportDone is a report run of the given generation with every step done.
func reportDone(gen int) *historyBuilder {
	h := &historyBuilder{wf: eventstore.WorkflowID{1}, run: eventstore.RunID{1}, at: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.add(eventstore.WorkflowStarted{WorkflowType: typeReport, Input: jsonPayload(startInput{Generation: gen})})
	h.add(eventstore.TimerScheduled{TimerID: execTimerID(gen, 0), FireAt: h.at.Add(time.Minute)})
	h.add(eventstore.ScheduleTriggered{}).add(eventstore.ScheduleTriggered{})
	return h.schedule(0, "agent_summarize", 1, 0).complete(0).
		schedule(1, "publish_report", 2, 0).complete(1).
		schedule(2, "agent_summarize", 4, 0).complete(2).
		schedule(3, "publish_report", 5, 0).complete(3)
}

func TestDecide(t *testing.T) {
	srv, err := New(WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	testCases := []struct {
		name   string
		build  func() *historyBuilder
		kinds  string
		closes eventstore.WorkflowStatus
		check  func(t *testing.T, st *runState, d *decision)
	}{
		{
			name:  "a new checkout schedules its first activity through the outbox",
			build: func() *historyBuilder { return newHistory(typeCheckout).armExec() },
			kinds: "ActivityScheduled,TimerScheduled",
			check: func(t *testing.T, st *runState, d *decision) {
				sched := d.events[0].(eventstore.ActivityScheduled)
				in, err := decodeActivityInput(sched.Input)
				if err != nil {
					t.Fatal(err)
				}
				if sched.ActivityID != 0 || sched.ActivityType != "reserve_inventory" || in.Step != 0 || in.ArmedSeq != d.seqOf(1) || in.Timer != string(activityTimerID(1, 0)) {
					t.Errorf("scheduled %+v, input %+v", sched, in)
				}
				if len(d.rows) != 1 || d.rows[0].DispatchKey != eventstore.DispatchKey(st.workflow, st.run, 0) || d.rows[0].RunID != st.run {
					t.Errorf("rows %+v", d.rows)
				}
				if len(d.arms) != 1 || d.arms[0].index != 1 || !d.arms[0].fireAt.Equal(at.Add(750*time.Millisecond)) {
					t.Errorf("arms %+v", d.arms)
				}
				for _, ev := range d.events {
					if env := ev.EventEnvelope(); env.RunID != st.run || !env.RecordedAt.Equal(at) {
						t.Errorf("%T envelope %+v: want the run and the decision's clock", ev, env)
					}
				}
			},
		},
		{
			name:  "a run without its execution timeout arms it",
			build: func() *historyBuilder { return newHistory(typeCheckout) },
			kinds: "TimerScheduled,ActivityScheduled,TimerScheduled",
		},
		{
			name: "waiting for a signal decides nothing",
			build: func() *historyBuilder {
				return checkoutPaid().schedule(2, "ship_order", 3, 0).complete(2).schedule(3, "send_receipt", 4, 0)
			},
			kinds: "",
		},
		{
			name: "the awaited signal moves the workflow on",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).armExec().
					schedule(0, "reserve_inventory", 0, 0).complete(0).
					schedule(1, "charge_card", 1, 0).complete(1)
			},
			kinds: "",
			check: func(t *testing.T, st *runState, _ *decision) {
				st.signals[signalPayment] = 1
				d := srv.decide(st, at)
				if got := kinds(d.events); got != "ActivityScheduled,TimerScheduled" {
					t.Errorf("after the signal: %s", got)
				}
			},
		},
		{
			name:  "a paused run decides nothing",
			build: func() *historyBuilder { return checkoutPaid().add(eventstore.WorkflowPaused{}) },
			kinds: "",
		},
		{
			name: "a fired activity timeout ends the activity and fails the workflow",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).armExec().schedule(0, "reserve_inventory", 0, 0).fire(activityTimerID(1, 0))
			},
			kinds:  "ActivityTimedOut,WorkflowFailed",
			closes: eventstore.StatusFailed,
			check: func(t *testing.T, st *runState, d *decision) {
				if len(d.retire) != 1 || d.retire[0].TimerID != execTimerID(1, 0) {
					t.Errorf("retire %+v: want the execution timeout only (the activity's fired)", d.retire)
				}
			},
		},
		{
			name:   "a cancellation request cancels the open activity and the workflow",
			build:  func() *historyBuilder { return checkoutPaid().schedule(2, "ship_order", 3, 0).signal(signalCancel) },
			kinds:  "ActivityCancelled,WorkflowCancelled",
			closes: eventstore.StatusCancelled,
			check: func(t *testing.T, st *runState, d *decision) {
				if len(d.retire) != 2 {
					t.Errorf("retire %+v: want the execution timeout and the activity's timeout", d.retire)
				}
			},
		},
		{
			name:   "the execution timeout abandons open activities",
			build:  func() *historyBuilder { return checkoutPaid().schedule(2, "ship_order", 3, 0).fire(execTimerID(1, 0)) },
			kinds:  "WorkflowTimedOut",
			closes: eventstore.StatusTimedOut,
			check: func(t *testing.T, st *runState, d *decision) {
				if d.abandoned != 1 || !d.settleRows {
					t.Errorf("abandoned %d settleRows %v: want 1 and the rows cancelled", d.abandoned, d.settleRows)
				}
			},
		},
		{
			name: "a parallel step schedules every slot in one batch",
			build: func() *historyBuilder {
				return newHistory(typeOnboarding).armExec().schedule(0, "create_account", 0, 0).complete(0)
			},
			kinds: "ActivityScheduled,TimerScheduled,ActivityScheduled,TimerScheduled,ActivityScheduled,TimerScheduled",
			check: func(t *testing.T, st *runState, d *decision) {
				for i, want := range []eventstore.ActivityID{1, 2, 3} {
					sched := d.events[2*i].(eventstore.ActivityScheduled)
					in, _ := decodeActivityInput(sched.Input)
					if sched.ActivityID != want || in.Slot != i || in.ArmedSeq != d.seqOf(2*i+1) {
						t.Errorf("slot %d: id %d input %+v", i, sched.ActivityID, in)
					}
				}
				if len(d.rows) != 3 {
					t.Errorf("%d rows, want 3", len(d.rows))
				}
			},
		},
		{
			name: "a failed parallel activity cancels its siblings",
			build: func() *historyBuilder {
				return newHistory(typeOnboarding).armExec().schedule(0, "create_account", 0, 0).complete(0).
					schedule(1, "provision_workspace", 1, 0).schedule(2, "configure_billing", 1, 1).schedule(3, "import_contacts", 1, 2).
					complete(1).failTerminal(2)
			},
			kinds:  "ActivityCancelled,WorkflowFailed",
			closes: eventstore.StatusFailed,
			check: func(t *testing.T, st *runState, d *decision) {
				if c := d.events[0].(eventstore.ActivityCancelled); c.ActivityID != 3 {
					t.Errorf("cancelled activity %d, want 3", c.ActivityID)
				}
				if msg := d.events[1].(eventstore.WorkflowFailed).Message; !strings.Contains(msg, "configure_billing failed") {
					t.Errorf("failure message %q", msg)
				}
			},
		},
		{
			name: "a reopened run schedules the failed step again",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).armExec().schedule(0, "reserve_inventory", 0, 0).failTerminal(0).
					add(eventstore.WorkflowFailed{}).add(eventstore.WorkflowReopened{})
			},
			kinds: "TimerScheduled,ActivityScheduled,TimerScheduled",
			check: func(t *testing.T, st *runState, d *decision) {
				if id := d.events[0].(eventstore.TimerScheduled).TimerID; id != execTimerID(1, 1) {
					t.Errorf("armed %s, want the reopened run's execution timeout", id)
				}
				if sched := d.events[1].(eventstore.ActivityScheduled); sched.ActivityID != 1 || sched.ActivityType != "reserve_inventory" {
					t.Errorf("scheduled %d %s", sched.ActivityID, sched.ActivityType)
				}
			},
		},
		{
			name: "an optional step's failure does not fail the workflow",
			build: func() *historyBuilder {
				return checkoutPaid().schedule(2, "ship_order", 3, 0).complete(2).schedule(3, "send_receipt", 4, 0).failTerminal(3)
			},
			kinds:  "WorkflowCompleted",
			closes: eventstore.StatusCompleted,
		},
		{
			name: "a sleep step arms its timer, then waits for it",
			build: func() *historyBuilder {
				return newHistory(typeOnboarding).armExec().schedule(0, "create_account", 0, 0).complete(0).
					schedule(1, "provision_workspace", 1, 0).schedule(2, "configure_billing", 1, 1).schedule(3, "import_contacts", 1, 2).
					complete(1).complete(2).complete(3)
			},
			kinds: "TimerScheduled",
			check: func(t *testing.T, st *runState, d *decision) {
				if id := d.events[0].(eventstore.TimerScheduled).TimerID; id != sleepTimerID(1, 2) {
					t.Errorf("armed %s", id)
				}
			},
		},
		{
			name:   "a finished run of an early generation continues as new",
			build:  func() *historyBuilder { return reportDone(1) },
			kinds:  "WorkflowContinuedAsNew,WorkflowStarted,TimerScheduled",
			closes: eventstore.StatusContinuedAsNew,
			check: func(t *testing.T, st *runState, d *decision) {
				can := d.events[0].(eventstore.WorkflowContinuedAsNew)
				started := d.events[1].(eventstore.WorkflowStarted)
				timer := d.events[2].(eventstore.TimerScheduled)
				if started.RunID != can.NewRunID || can.NewRunID.IsZero() || can.RunID != st.run || timer.RunID != can.NewRunID {
					t.Errorf("continue-as-new %+v, started %+v", can, started)
				}
				if d.newRunStart != d.seqOf(1) || timer.TimerID != execTimerID(2, 0) {
					t.Errorf("newRunStart %d timer %s", d.newRunStart, timer.TimerID)
				}
			},
		},
		{
			name:   "the last generation completes",
			build:  func() *historyBuilder { return reportDone(workflowSpecs[typeReport].generations) },
			kinds:  "WorkflowCompleted",
			closes: eventstore.StatusCompleted,
		},
		{
			name: "a report waits for its schedule's second firing",
			build: func() *historyBuilder {
				h := newHistory(typeReport).armExec().add(eventstore.ScheduleTriggered{})
				return h.schedule(0, "agent_summarize", 1, 0).complete(0).schedule(1, "publish_report", 2, 0).complete(1)
			},
			kinds: "",
			check: func(t *testing.T, st *runState, d *decision) {
				st.triggers++
				if got := kinds(srv.decide(st, at).events); got != "ActivityScheduled,TimerScheduled" {
					t.Errorf("after the second firing: %s", got)
				}
			},
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.build().fold()
			if st.err != nil {
				t.Fatal(st.err)
			}
			d := srv.decide(st, at)
			if got := kinds(d.events); got != tc.kinds {
				t.Errorf("decided %q, want %q", got, tc.kinds)
			}
			if d.closes != tc.closes {
				t.Errorf("closes %q, want %q", d.closes, tc.closes)
			}
			if d.head != st.head {
				t.Errorf("built against head %d, state head %d", d.head, st.head)
			}
			if tc.check != nil {
				tc.check(t, st, d)
			}
		})
	}
}
