// @vitest-environment happy-dom
/**
 * Insert as cell (./codeblocks.ts) on a notebook played by the test: the shared model's insertCell and the
 * cell widgets it makes, as JupyterLab's notebook does.
 */
import { describe, expect, it } from 'vitest';
import type { NotebookPanel } from '@jupyterlab/notebook';

import { belowItsCell, insertBelow, isModelCode, setLiveMark, watchCodeBlocks } from './codeblocks';

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

const MARK = 'nba-live-0123456789abcdef01234567';
const OLD = 'nba-live-fedcba9876543210fedcba98';

/** An nbagent view's model text holding one code block with `classes`, in a code cell's output (or, with
 * `cell: 'markdown'`, in a rendered Markdown cell: markup anyone may write). */
function view(classes: string, cell: 'output' | 'markdown' = 'output'): HTMLElement {
  const root = document.createElement('div');
  const block = `<div class="nba"><div class="nba-body"><div class="nba-md"><pre class="nba-code-block nba-lang-python ${classes}"><code>print(1)</code></pre></div></div></div>`;
  root.innerHTML = cell === 'output'
    ? `<div class="jp-OutputArea"><div class="jp-OutputArea-output">${block}</div></div>`
    : `<div class="jp-Cell jp-MarkdownCell"><div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput">${block}</div></div>`;
  document.body.append(root);
  return root;
}

describe('which blocks get Copy and Insert as cell', () => {
  it("in a notebook, only a block that carries its live kernel's mark", () => {
    const pre = (classes: string) => view(classes).querySelector('pre')!;
    expect(isModelCode(pre(MARK), MARK)).toBe(true);
    expect(isModelCode(pre(OLD), MARK)).toBe(false); // a saved output: an earlier kernel's, or forged
    expect(isModelCode(pre(''), MARK)).toBe(false); // forged with nbagent's classes and no mark
    expect(isModelCode(pre(MARK), null)).toBe(false); // no hello from a kernel yet: nothing qualifies
    expect(isModelCode(pre(''))).toBe(true); // the panel: drawn from the live kernel's messages only
  });

  it("never in a Markdown cell, whose source anyone may write, even with the live mark", () => {
    const inMarkdown = view(MARK, 'markdown').querySelector('pre')!;
    expect(isModelCode(inMarkdown, MARK)).toBe(false);
    const outside = document.createElement('div'); // nor outside any output (markup the page did not draw there)
    outside.innerHTML = view(MARK).querySelector('.nba')!.outerHTML;
    document.body.append(outside);
    expect(isModelCode(outside.querySelector('pre')!, MARK)).toBe(false);
    expect(isModelCode(view(MARK).querySelector('pre')!, MARK)).toBe(true); // control: the same in a code output
  });

  it("gives buttons once the kernel says its mark, and takes them from another kernel's blocks", async () => {
    const owner = {};
    const root = document.createElement('div');
    document.body.append(root);
    root.append(view(MARK), view(OLD), view(''));
    const stop = watchCodeBlocks(root, () => null, owner);
    const wrapped = () => Array.from(root.querySelectorAll('.nba-code-wrap pre')).map(p => p.className);
    expect(wrapped()).toEqual([]); // before the hello
    setLiveMark(owner, MARK);
    expect(wrapped()).toEqual([`nba-code-block nba-lang-python ${MARK}`]);
    setLiveMark(owner, OLD); // a restarted kernel (here: one whose mark the other block carries)
    expect(wrapped()).toEqual([`nba-code-block nba-lang-python ${OLD}`]);
    setLiveMark(owner, 'nba-live-not-a-mark');
    expect(wrapped()).toEqual([`nba-code-block nba-lang-python ${OLD}`]); // not a mark: ignored
    stop();
  });
});
