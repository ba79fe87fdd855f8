/**
 * What a review of a proposed notebook change shows on its cell (./review.ts draws it): the title naming the
 * cell as the person sees it, the diff, and, when the change can no longer apply, why, said to the person
 * before anyone clicks. Pure: no DOM, no JupyterLab (tested in proposal.test.ts).
 */
import { applyEdit } from '../notebook/cellEdits';
import type { Review } from './protocol';

/** What nbagent is told when the person rejects an edit of a cell they changed after it read the cell. */
export const CHANGED_REASON =
  'the person changed this cell after you read it, so this edit no longer applies; read it again ' +
  '(read_notebook) and base any change on what it holds now';

/** What a review shows: its title, the diff, and (when it can no longer apply) why, said to the person. */
export type Shown = { what: string; before: string; after: string; stale: string | null };

/**
 * A proposal on a cell that holds `source` now, the cell named `name` as the person sees it. An edit or a
 * deletion is based on what nbagent last read of the cell (`review.expected`): the notebook applies it only
 * while the cell holds exactly that, so when the person changed the cell since, the review says so before
 * anyone clicks, and shows the change as it was proposed, on the text nbagent read.
 */
export function proposal(review: Review, source: string, name: string): Shown {
  const args = review.arguments ?? {};
  const expected = typeof review.expected === 'string' ? review.expected : null;
  const changed = expected !== null && expected !== source;
  const base = changed ? expected! : source;
  if (review.tool === 'insert_cell') {
    const where = args.after ? `after ${name}` : 'at the end of the notebook';
    return { what: `nbagent proposes a new ${args.cell_type ?? 'code'} cell ${where}`, before: '', after: String(args.source ?? ''),
      stale: null };
  }
  if (review.tool === 'delete_cell') {
    return { what: `nbagent proposes deleting ${name}`, before: base, after: '',
      stale: changed ? `You changed ${name} after nbagent read it, so this deletion can no longer be accepted ` +
        '(your text would be lost). Reject it: nbagent is told the cell changed. Or undo your change (Ctrl+Z) ' +
        'to accept it.' : null };
  }
  const old = String(args.old ?? '');
  const replacement = String(args.new ?? '');
  const after = applyEdit(base, old, replacement);
  let stale: string | null = null;
  if (changed) {
    stale = `You changed ${name} after nbagent read it. This edit was made for the text it held then, so it can ` +
      'no longer be accepted. Reject it: nbagent is told the cell changed and can propose the edit again. Or ' +
      'undo your change (Ctrl+Z) to accept it. The edit as proposed:';
  } else if (after === null) {
    stale = `${name} no longer holds the text this edit replaces, so it can no longer be accepted. Reject it: ` +
      'nbagent is told. The edit as proposed:';
  }
  return after === null
    ? { what: `nbagent proposes this edit of ${name}`, before: old, after: replacement, stale }
    : { what: `nbagent proposes this edit of ${name}`, before: base, after, stale };
}
