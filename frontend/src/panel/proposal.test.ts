import { describe, expect, it } from 'vitest';

import { CHANGED_REASON, proposal } from './proposal';
import type { Review } from './protocol';

const edit = (expected: string | null, old = 'total / count', replacement = 'total / max(count, 1)'): Review => ({
  call: 'call_1', tool: 'edit_cell', digest: 'd', expected,
  arguments: { cell_id: 'c2', old, new: replacement }
});

const NAME = '[3] rate = total / count';

describe('proposal: a review says, before anyone clicks, when its cell changed', () => {
  it('shows the edit on the cell as it is, named as the person sees it, with no run or call id', () => {
    const shown = proposal(edit('rate = total / count'), 'rate = total / count', NAME);
    expect(shown).toEqual({ what: `nbagent proposes this edit of ${NAME}`, before: 'rate = total / count',
      after: 'rate = total / max(count, 1)', stale: null });
    expect(shown.what).not.toMatch(/call_1|c2/);
  });

  it('says so when the person changed the cell after nbagent read it, even where the edit would still fit', () => {
    // the text the edit replaces is still there, but the notebook applies it only to what nbagent read
    const shown = proposal(edit('rate = total / count'), '# mine\nrate = total / count', NAME);
    expect(shown.stale).toMatch(/^You changed \[3\] rate = total \/ count after nbagent read it/);
    expect(shown.stale).not.toMatch(/you read|read_notebook/); // said to the person, not to the model
    // the change as proposed, on the text nbagent read
    expect([shown.before, shown.after]).toEqual(['rate = total / count', 'rate = total / max(count, 1)']);
  });

  it('is acceptable again once the person puts the cell back', () => {
    const read = 'rate = total / count';
    expect(proposal(edit(read), '# mine\n' + read, NAME).stale).not.toBeNull();
    expect(proposal(edit(read), read, NAME).stale).toBeNull();
  });

  it('says so when the text it replaces is gone, with nothing read to compare with', () => {
    const shown = proposal(edit(null), 'rate = 0', NAME);
    expect(shown.stale).toMatch(/no longer holds the text this edit replaces/);
    expect([shown.before, shown.after]).toEqual(['total / count', 'total / max(count, 1)']);
  });

  it('a deletion of a changed cell is not acceptable either; an insertion never depends on a cell\'s text', () => {
    const del: Review = { call: 'c', tool: 'delete_cell', digest: 'd', expected: 'old', arguments: { cell_id: 'c2' } };
    expect(proposal(del, 'old', NAME).stale).toBeNull();
    expect(proposal(del, 'new text', NAME).stale).toMatch(/^You changed \[3\]/);
    const ins: Review = { call: 'c', tool: 'insert_cell', digest: 'd', arguments: { source: 'y = 2', after: 'c2' } };
    expect(proposal(ins, 'anything', NAME)).toEqual({ what: `nbagent proposes a new code cell after ${NAME}`,
      before: '', after: 'y = 2', stale: null });
  });

  it('tells the model, on Reject, why in words it can act on', () => {
    expect(CHANGED_REASON).toMatch(/changed this cell after you read it.*read it again/);
  });
});
