package journal

import "fmt"

// Tracker records the start and the outcome of one step. RunStep is its one
// caller, so every recorded step of the suite follows the same rule.
type Tracker interface {
	Start() error
	Finish(err error) error
}

// RunStep runs fn as one recorded step: start, run, done or failed. fn does
// not run when its start could not be recorded; fn's own error wins over a
// failure to record the outcome, which is appended to it.
func RunStep(t Tracker, fn func() error) error {
	if err := t.Start(); err != nil {
		return err
	}
	err := fn()
	ferr := t.Finish(err)
	switch {
	case err == nil:
		return ferr
	case ferr != nil:
		return fmt.Errorf("%w (recording the failure also failed: %v)", err, ferr)
	}
	return err
}

// PhaseStep tracks phase p of the open transaction.
func (j *Journal) PhaseStep(p Phase) Tracker { return phaseTracker{j, p} }

type phaseTracker struct {
	j *Journal
	p Phase
}

func (t phaseTracker) Start() error {
	_, err := t.j.Start(t.p)
	return err
}

func (t phaseTracker) Finish(err error) error {
	if err == nil {
		_, ferr := t.j.Done(t.p)
		return ferr
	}
	_, ferr := t.j.Fail(t.p, err.Error())
	return ferr
}

// EventStep tracks a step that is not a phase of the transaction (a slot's
// provider step, a switch) as started, done and failed history events. A
// nil journal records nothing.
func (j *Journal) EventStep(ev Event) Tracker { return eventTracker{j, ev} }

type eventTracker struct {
	j  *Journal
	ev Event
}

func (t eventTracker) Start() error { return t.record(StatusStarted, nil) }

func (t eventTracker) Finish(err error) error {
	if err != nil {
		return t.record(StatusFailed, err)
	}
	return t.record(StatusDone, nil)
}

func (t eventTracker) record(status string, err error) error {
	if t.j == nil {
		return nil
	}
	ev := t.ev
	ev.Status = status
	if err != nil {
		ev.Error = err.Error()
	}
	return t.j.Record(ev)
}
