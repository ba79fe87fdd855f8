// @vitest-environment happy-dom
/**
 * Insert as cell (./codeblocks.ts) on a notebook played by the test: the shared model's insertCell and the
 * cell widgets it makes, as JupyterLab's notebook does.
 */
import { describe, expect, it } from 'vitest';
import type { NotebookPanel } from '@jupyterlab/notebook';

import { belowItsCell, insertBelow } from './codeblocks';

type Cell = { node: HTMLElement; model: { id: string; source: string } };

function notebook(sources: string[]) {
  let next = 0;
  const make = (source: string): Cell => {
    const node = document.createElement('div');
    node.innerHTML = '<pre class="nba-code-block"><code></code></pre>';
    return { node, model: { id: `cell-${next++}`, source } };
  };
  const widgets: Cell[] = sources.map(make);
  const panel = {
    model: {
      sharedModel: {
        transact: (f: () => void) => f(),
        insertCell: (at: number, cell: { source: string }) => widgets.splice(at, 0, make(cell.source))
      }
    },
    content: { widgets, activeCellIndex: 0, mode: 'edit', scrollToCell: () => Promise.resolve() }
  };
  return { panel: panel as unknown as NotebookPanel, widgets };
}

describe('Insert as cell', () => {
  it("puts successive blocks of one output below its cell in the order they are inserted", () => {
    const { panel, widgets } = notebook(['%agent clean the data', 'print(df)']);
    const place = belowItsCell(panel);
    const block = widgets[0].node.querySelector('pre')!;
    for (const source of ['first()', 'second()', 'third()']) {
      insertBelow(place(block)!, { cell_type: 'code', source });
    }
    expect(widgets.map(w => w.model.source)).toEqual(['%agent clean the data', 'first()', 'second()', 'third()', 'print(df)']);
    expect(panel.content.activeCellIndex).toBe(3);
  });

  it("puts a block right below its cell again once the cells made before are no longer there", () => {
    const { panel, widgets } = notebook(['%agent a', 'x = 1']);
    const place = belowItsCell(panel);
    const block = widgets[0].node.querySelector('pre')!;
    insertBelow(place(block)!, { cell_type: 'code', source: 'made()' });
    widgets.splice(1, 1); // the person deleted it
    insertBelow(place(block)!, { cell_type: 'code', source: 'again()' });
    expect(widgets.map(w => w.model.source)).toEqual(['%agent a', 'again()', 'x = 1']);
  });
});
