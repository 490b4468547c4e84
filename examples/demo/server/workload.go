package server

import "time"

// The simulated workload: which workflow types the server runs, what their
// steps are, and how their activities behave. Everything here is data; the
// decider (decide.go) interprets it.

// stepKind says what a workflow step does and waits for.
type stepKind uint8

const (
	// stepActivities schedules one activity per entry of step.acts (in
	// parallel) and waits until every one has ended.
	stepActivities stepKind = iota + 1
	// stepSleep arms a durable timer and waits until it fires.
	stepSleep
	// stepSignal waits until the signal step.signal has been received (once
	// more than by the earlier steps waiting for the same signal).
	stepSignal
	// stepTrigger waits until the workflow's schedule has fired (once more
	// than for the earlier trigger steps).
	stepTrigger
)

type step struct {
	kind stepKind
	acts []string
	// optional: an activity of this step that ends without success does not
	// fail the workflow.
	optional bool
	sleep    [2]time.Duration
	signal   string
}

// signalPlan is a signal the outside world sends to a workflow of some type:
// with probability chance, once, at a random time after the start.
type signalPlan struct {
	name   string
	chance float64
	after  [2]time.Duration
}

type workflowSpec struct {
	name   string
	weight int // share of the workflows started
	steps  []step
	// execTimeout is the run's execution timeout, from its start (or reopen).
	execTimeout time.Duration
	// generations is the length of the continue-as-new chain: after its
	// steps, a run of generation g < generations continues as new.
	generations int
	// schedule is the interval range of the workflow's schedule (zero: it
	// has none).
	schedule [2]time.Duration
	// cancelSignal, when received, cancels the run and its open activities.
	cancelSignal string
	signals      []signalPlan
	// pause is the probability that an operator pauses a run for a while.
	pause float64
	// reopen is the probability that an operator reopens a failed run.
	reopen float64
}

// plan is how a simulated activity behaves. The workflow draws it when it
// schedules the activity and passes it in the activity input, as a real
// workflow passes its arguments.
type plan string

const (
	planSucceed plan = "succeed"  // the first attempt succeeds
	planRetry   plan = "retry"    // one or two retryable failures, then success
	planFail    plan = "fail"     // a terminal failure
	planCancel  plan = "cancel"   // the downstream system cancels the work
	planTimeout plan = "time_out" // the attempt overruns the activity timeout
)

var plans = [...]plan{planSucceed, planRetry, planFail, planCancel, planTimeout}

type activitySpec struct {
	work    [2]time.Duration // one attempt's work
	backoff [2]time.Duration // pause before a retry
	// timeout is the schedule-to-close timeout: it covers every attempt.
	timeout time.Duration
	// agent activities run an LLM agent and write its transcript; turns is
	// the range of agent turns per attempt, each taking work.
	agent   bool
	turns   [2]int
	role    string
	weights [len(plans)]int // in the order of plans
}

const (
	signalPayment  = "payment_confirmed"
	signalCancel   = "cancel_order"
	signalProfile  = "profile_completed"
	signalNote     = "customer_note"
	typeCheckout   = "checkout"
	typeOnboarding = "onboarding"
	typeReport     = "report"
)

var workflowSpecs = map[string]*workflowSpec{
	typeCheckout: {
		name:   typeCheckout,
		weight: 5,
		steps: []step{
			{kind: stepActivities, acts: []string{"reserve_inventory"}},
			{kind: stepActivities, acts: []string{"charge_card"}},
			{kind: stepSignal, signal: signalPayment},
			{kind: stepActivities, acts: []string{"ship_order"}},
			{kind: stepActivities, acts: []string{"send_receipt"}, optional: true},
		},
		execTimeout:  3 * time.Second,
		generations:  1,
		cancelSignal: signalCancel,
		signals: []signalPlan{
			{name: signalPayment, chance: 0.95, after: [2]time.Duration{50 * time.Millisecond, 400 * time.Millisecond}},
			{name: signalCancel, chance: 0.05, after: [2]time.Duration{100 * time.Millisecond, 900 * time.Millisecond}},
			{name: signalNote, chance: 0.25, after: [2]time.Duration{0, 600 * time.Millisecond}},
		},
		pause:  0.05,
		reopen: 0.4,
	},
	typeOnboarding: {
		name:   typeOnboarding,
		weight: 3,
		steps: []step{
			{kind: stepActivities, acts: []string{"create_account"}},
			{kind: stepActivities, acts: []string{"provision_workspace", "configure_billing", "import_contacts"}},
			{kind: stepSleep, sleep: [2]time.Duration{100 * time.Millisecond, 400 * time.Millisecond}},
			{kind: stepActivities, acts: []string{"agent_welcome_tour"}},
			{kind: stepSignal, signal: signalProfile},
			{kind: stepActivities, acts: []string{"send_welcome_email"}, optional: true},
		},
		execTimeout: 5 * time.Second,
		generations: 1,
		signals: []signalPlan{
			{name: signalProfile, chance: 0.9, after: [2]time.Duration{200 * time.Millisecond, 1200 * time.Millisecond}},
			{name: signalNote, chance: 0.25, after: [2]time.Duration{0, 1000 * time.Millisecond}},
		},
		pause:  0.1,
		reopen: 0.4,
	},
	typeReport: {
		name:   typeReport,
		weight: 2,
		steps: []step{
			{kind: stepTrigger},
			{kind: stepActivities, acts: []string{"agent_summarize"}},
			{kind: stepActivities, acts: []string{"publish_report"}},
			{kind: stepTrigger},
			{kind: stepActivities, acts: []string{"agent_summarize"}},
			{kind: stepActivities, acts: []string{"publish_report"}},
		},
		execTimeout: 6 * time.Second,
		generations: 3,
		schedule:    [2]time.Duration{100 * time.Millisecond, 300 * time.Millisecond},
		pause:       0.05,
		reopen:      0.4,
	},
}

// workflowTypes lists the types in a fixed order, for weighted picks.
var workflowTypes = []string{typeCheckout, typeOnboarding, typeReport}

func ms(lo, hi int) [2]time.Duration {
	return [2]time.Duration{time.Duration(lo) * time.Millisecond, time.Duration(hi) * time.Millisecond}
}

var activitySpecs = map[string]*activitySpec{
	//                                                                          succeed retry fail cancel time_out
	"reserve_inventory":   {work: ms(10, 60), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{92, 5, 2, 0, 1}},
	"charge_card":         {work: ms(20, 120), backoff: ms(20, 80), timeout: 750 * time.Millisecond, weights: [5]int{84, 11, 3, 0, 2}},
	"ship_order":          {work: ms(30, 150), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{89, 5, 0, 4, 2}},
	"send_receipt":        {work: ms(5, 40), backoff: ms(10, 40), timeout: 750 * time.Millisecond, weights: [5]int{90, 8, 2, 0, 0}},
	"create_account":      {work: ms(20, 80), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{94, 5, 1, 0, 0}},
	"provision_workspace": {work: ms(30, 150), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{88, 9, 1, 0, 2}},
	"configure_billing":   {work: ms(30, 150), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{92, 5, 1, 2, 0}},
	"import_contacts":     {work: ms(30, 150), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{86, 10, 1, 2, 1}},
	"send_welcome_email":  {work: ms(5, 40), backoff: ms(10, 40), timeout: 750 * time.Millisecond, weights: [5]int{92, 6, 2, 0, 0}},
	"publish_report":      {work: ms(10, 60), backoff: ms(20, 60), timeout: 750 * time.Millisecond, weights: [5]int{94, 5, 1, 0, 0}},
	"agent_welcome_tour": {work: ms(30, 90), backoff: ms(20, 60), timeout: 1500 * time.Millisecond,
		agent: true, turns: [2]int{2, 4}, role: "guide", weights: [5]int{88, 9, 1, 0, 2}},
	"agent_summarize": {work: ms(30, 90), backoff: ms(20, 60), timeout: 1500 * time.Millisecond,
		agent: true, turns: [2]int{2, 4}, role: "analyst", weights: [5]int{88, 9, 1, 0, 2}},
}
