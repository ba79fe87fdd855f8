/**
 * Undo all: every change a run made to the notebook put back, the latest first (two edits of one cell are
 * undone in the order that leads back through what the cell held between them), stopping at the first one
 * that cannot be undone exactly (the person changed that cell since) so nothing is guessed. Pure: the undo
 * of one change is passed in (./review.ts undoChange on a page; tested in changes.test.ts).
 */
import type { Change } from './protocol';

/** What Undo all did: the changes it undid, in that order, and the one it stopped at, with why. */
export type UndoOutcome = { undone: Change[]; refused: { change: Change; why: string } | null };

export function undoAll(changes: readonly Change[], undoOne: (change: Change) => void): UndoOutcome {
  const undone: Change[] = [];
  for (const change of [...changes].reverse()) {
    if (change.undone) {
      continue;
    }
    try {
      undoOne(change);
    } catch (err) {
      return { undone, refused: { change, why: err instanceof Error ? err.message : String(err) } };
    }
    undone.push(change);
  }
  return { undone, refused: null };
}

/** What Undo all says when it stopped: how many it undid, and why the rest were left. */
export function undoSummary(outcome: UndoOutcome): string | null {
  if (outcome.refused === null) {
    return null;
  }
  const n = outcome.undone.length;
  return `Undid ${n} change${n === 1 ? '' : 's'}, then stopped: ${outcome.refused.why}`;
}
