import { describe, expect, it } from 'vitest';

import { undoAll, undoSummary } from './changes';
import type { Change } from './protocol';

const change = (call: string, cell: string, before: string | null, after: string, undone = false): Change => ({
  call, action: 'edited', cell_id: cell, name: `[1] ${cell}`, index: 0, cell_type: 'code', before, after, undone
});

/** A notebook of cells by id, and the exact undo the page does: only while the cell holds what nbagent left. */
function notebook(cells: { [id: string]: string }) {
  return (c: Change) => {
    if (cells[c.cell_id] !== c.after) {
      throw new Error(`${c.name} was changed after nbagent edited it; nothing was undone`);
    }
    cells[c.cell_id] = c.before!;
  };
}

describe('undoAll: every change of a run put back, the latest first', () => {
  it('undoes two edits of one cell in the order that leads back to what it held', () => {
    const cells = { a: 'x = 3', b: 'y = 2' };
    const changes = [change('1', 'a', 'x = 1', 'x = 2'), change('2', 'b', 'y = 1', 'y = 2'), change('3', 'a', 'x = 2', 'x = 3')];
    const outcome = undoAll(changes, notebook(cells));
    expect(outcome.undone.map(c => c.call)).toEqual(['3', '2', '1']);
    expect(cells).toEqual({ a: 'x = 1', b: 'y = 1' });
    expect(undoSummary(outcome)).toBeNull();
    // in the order they were made, the first undo would already be refused
    const again = { a: 'x = 3' };
    expect(() => notebook(again)(changes[0])).toThrow(/changed after nbagent/);
  });

  it('skips what was undone already and stops at a cell the person changed, saying why', () => {
    const cells = { a: 'mine', b: 'y = 2', c: 'z = 2' };
    const changes = [change('1', 'a', 'x = 1', 'x = 2'), change('2', 'b', 'y = 1', 'y = 2'),
      change('3', 'c', 'z = 1', 'z = 2', true)];
    const outcome = undoAll(changes, notebook(cells));
    expect(outcome.undone.map(c => c.call)).toEqual(['2']);
    expect(outcome.refused?.change.call).toBe('1');
    expect(cells).toEqual({ a: 'mine', b: 'y = 1', c: 'z = 2' });
    expect(undoSummary(outcome)).toBe('Undid 1 change, then stopped: [1] a was changed after nbagent edited it; nothing was undone');
  });
});
