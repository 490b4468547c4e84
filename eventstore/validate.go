package eventstore

// ValidateAppend checks the arguments of an append before anything is written.
// Any store, not only [Memory], can call it first so that every implementation
// refuses the same inputs in the same way.
//
// It returns an error wrapping [ErrInvalidArgument] when workflowID is zero,
// or when an event of the batch is nil, is not one of this package's event
// kinds held by value (a pointer such as *WorkflowStarted, or a type that
// embeds a kind, is refused), has an envelope naming a workflow other than
// workflowID, or has a zero RunID. The message names the index of the first
// bad event. An empty batch with a non-zero workflowID is valid.
//
// ValidateAppend does not look at Seq (the store stamps it) or RecordedAt (a
// zero one is filled in at commit), and it does not check the write token or
// the expected sequence.
func ValidateAppend(workflowID WorkflowID, events []Event) error {
	if workflowID.IsZero() {
		return invalidf("zero workflow ID")
	}
	for i, ev := range events {
		if ev == nil {
			return invalidf("event %d is nil", i)
		}
		if _, ok := kindName(ev); !ok {
			return invalidf("event %d has type %T, which is not an event kind of this package held by value", i, ev)
		}
		env := ev.EventEnvelope()
		if !env.WorkflowID.IsZero() && env.WorkflowID != workflowID {
			return invalidf("event %d names workflow %s, but the append is for workflow %s", i, env.WorkflowID, workflowID)
		}
		if env.RunID.IsZero() {
			return invalidf("event %d has a zero run ID", i)
		}
	}
	return nil
}
