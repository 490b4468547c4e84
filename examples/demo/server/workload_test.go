package server

import (
	"testing"
	"time"
)

// TestWorkloadIsConsistent checks the workload tables: every activity a step
// names is defined, every activity's attempts fit in its timeout unless its
// plan is to overrun it, signal steps have a sender, and the schedule exists
// where trigger steps wait for it.
func TestWorkloadIsConsistent(t *testing.T) {
	if len(workflowTypes) != len(workflowSpecs) {
		t.Fatalf("%d types listed, %d specs", len(workflowTypes), len(workflowSpecs))
	}
	for _, typ := range workflowTypes {
		spec := workflowSpecs[typ]
		t.Run(typ, func(t *testing.T) {
			if spec == nil || spec.name != typ || spec.weight <= 0 || spec.generations < 1 || spec.execTimeout <= 0 {
				t.Fatalf("spec %+v", spec)
			}
			sent := map[string]bool{}
			for _, sp := range spec.signals {
				sent[sp.name] = sp.chance > 0
			}
			for i, stp := range spec.steps {
				switch stp.kind {
				case stepActivities:
					if len(stp.acts) == 0 {
						t.Errorf("step %d schedules nothing", i)
					}
					for _, a := range stp.acts {
						if activitySpecs[a] == nil {
							t.Errorf("step %d: activity %q undefined", i, a)
						}
					}
				case stepSignal:
					if !sent[stp.signal] {
						t.Errorf("step %d waits for %q, which nobody sends", i, stp.signal)
					}
				case stepTrigger:
					if spec.schedule[1] <= 0 {
						t.Errorf("step %d waits for a schedule the workflow lacks", i)
					}
				case stepSleep:
					if stp.sleep[1] <= 0 {
						t.Errorf("step %d sleeps for nothing", i)
					}
				default:
					t.Errorf("step %d: kind %d", i, stp.kind)
				}
			}
			if spec.cancelSignal != "" && !sent[spec.cancelSignal] {
				t.Errorf("cancel signal %q is never sent", spec.cancelSignal)
			}
		})
	}
	for name, a := range activitySpecs {
		t.Run(name, func(t *testing.T) {
			total := 0
			for _, w := range a.weights {
				total += w
			}
			if total <= 0 || a.weights[0] <= 0 {
				t.Errorf("weights %v", a.weights)
			}
			perAttempt := a.work[1]
			if a.agent {
				if a.turns[0] < 1 || a.turns[1] < a.turns[0] || agentScripts[name].prompt == "" {
					t.Errorf("agent turns %v, script %+v", a.turns, agentScripts[name])
				}
				perAttempt = time.Duration(a.turns[1])*a.work[1] + 10*time.Millisecond
			}
			// The worst case of the retry plan: three attempts, two backoffs.
			if worst := 3*perAttempt + 2*a.backoff[1]; worst >= a.timeout {
				t.Errorf("a retried activity may take %s, past its %s timeout", worst, a.timeout)
			}
		})
	}
}
