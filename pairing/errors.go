package pairing

import "errors"

// ErrInvalidOption is returned, wrapped, by [New] when an option cannot be
// honoured: today only [WithAttributes] given an attribute whose key it
// refuses (empty, not valid UTF-8, one no Prometheus exporter can turn into
// a label, or one of the keys the tracker sets itself). Test for it with
// errors.Is.
var ErrInvalidOption = errors.New("pairing: invalid option")

// ErrInvalidOutcome is reported, wrapped, to the telemetry error handler
// (otel.Handle) when [Tracker.Finished] is given an [Outcome] that is not
// one of the defined constants. The call changes nothing: the entry stays
// live, so the caller's corrected terminal still pairs with it.
var ErrInvalidOutcome = errors.New("pairing: invalid outcome")

// ErrInvalidStatus is reported, wrapped, to the telemetry error handler
// (otel.Handle) when [Tracker.RunClosed] is given a status that does not
// close a run (running, paused, or a value that is not an
// eventstore.WorkflowStatus constant). The call changes nothing.
var ErrInvalidStatus = errors.New("pairing: invalid run status")
