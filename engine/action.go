package engine

import "context"

// syncAction is one background action of the sync thread, driven by
// drive (md_do_sync's loop, Linux 6.1). The six actions implement it:
// resync (resyncAction), recovery (recoverAction), replace
// (replaceAction), check and repair (checkAction), and reshape
// (reshapeAction, reshape_action.go). drive owns what is
// common to them: the progress accounting (begin), the walk over the sync
// space in spans and units, the per-unit throttling by sync_speed_min/max
// and by user I/O (step), cancellation (idle, frozen, Close), and when
// progress is recorded (every 1/16 of the range or UPDATE_FREQUENCY,
// cpRule). The caller holds the sync slot and gives it back (release):
// runSync for the synchronous Resync and Check, runAction for the
// background actions (newAction; it chains the next action and sets
// recovery_disabled when one fails), startReplace for a replacement.
//
// Reshape: prepare returns the new geometry's array sectors and
// reshape_progress as the start; unit moves a window of new stripes (the
// largest that overwrites no old data a restart from the position then
// recorded still reads, recording reshape_position first when the
// recorded one is not enough, md's reshape_safe) with user I/O held
// back; checkpoint records nothing (md_do_sync leaves a reshape's records
// to reshape_request: reshape_record.go); finish
// switches the array to the new geometry or, interrupted, records where
// it got to for the next Open.
type syncAction interface {
	// name is the sync_action the progress shows.
	name() string
	// prepare decides the range: the sync-space size and where the
	// action starts. ok false: nothing to do (drive returns err).
	prepare() (total, from uint64, ok bool, err error)
	// span starts the span at s (total is the end of the range): it
	// returns the span's end and whether it needs work; a span that
	// needs none is skipped at once. An error ends the action.
	span(s, total uint64) (end uint64, work bool, err error)
	// unit does the work at p (at most max sectors, within the span)
	// and returns the sectors it covered; they count as sync I/O.
	unit(p, max uint64) (n uint64, err error)
	// spanDone ends the span started at s; aborted: the action stops
	// inside it.
	spanDone(s uint64, work, aborted bool)
	// checkpoint records progress at pos (curr_resync_completed);
	// inSpan says that pos was reached inside a span (not at its end).
	checkpoint(pos uint64, inSpan bool)
	// finish ends the action at pos: err is nil when the whole range is
	// done, otherwise why it stopped (an interrupted action records
	// where it got to). It returns the action's result.
	finish(pos uint64, err error) error
}

// drive runs act in the claimed sync slot.
func (a *Array) drive(ctx context.Context, act syncAction) error {
	total, from, ok, err := act.prepare()
	if !ok || err != nil {
		return err
	}
	a.begin(act.name(), total, from)
	cp := a.newCPRule(from, total)
	s := from
	for s < total && err == nil {
		if err = ctx.Err(); err != nil {
			break
		}
		var end uint64
		var work bool
		if end, work, err = act.span(s, total); err != nil {
			break
		}
		p := s
		if work {
			p, err = a.driveSpan(ctx, act, &cp, p, end, total)
		} else {
			p = end
		}
		act.spanDone(s, work, err != nil)
		s = p
		a.sc.pos.Store(s)
		if s < total && err == nil && cp.due(s) {
			act.checkpoint(s, false)
		}
	}
	return act.finish(s, err)
}

// driveSpan does the units of the span [p, end) and returns where it got
// to.
func (a *Array) driveSpan(ctx context.Context, act syncAction, cp *cpRule, p, end, total uint64) (uint64, error) {
	for p < end {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		n, err := act.unit(p, end-p)
		if err != nil {
			return p, err
		}
		p += n
		if err := a.step(ctx, p, syncIO(act, n)); err != nil {
			return p, err
		}
		// inside a span too: without a bitmap one span is the whole
		// range; every record md makes within the unit just done, the
		// last unit's too (md records them before it reaches the end)
		for {
			at, ok := cp.within(p)
			if !ok || at >= total {
				break
			}
			act.checkpoint(at, true)
		}
		if p < total && cp.due(p) {
			act.checkpoint(p, true)
		}
	}
	return p, nil
}

// runSync claims the sync slot for act (waiting for a running action to
// end), drives it and gives the slot back: the synchronous Resync and
// Check.
func (a *Array) runSync(ctx context.Context, act syncAction) error {
	c, err := a.claimWait(ctx, act.name())
	if err != nil {
		return err
	}
	defer a.release(true)
	return a.drive(c, act)
}

// wholeRange is the span of actions without a bitmap to follow: one span
// over the whole range, always to be worked.
type wholeRange struct{}

func (wholeRange) span(_, total uint64) (uint64, bool, error) { return total, true, nil }
func (wholeRange) spanDone(uint64, bool, bool)                {}
