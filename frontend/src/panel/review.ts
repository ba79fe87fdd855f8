/**
 * nbagent in the cells: a badge on each cell the agent inserted or changed (its run and call; a click shows
 * the run in the panel), "Fix with nbagent" and "Explain" under an error, and a proposed edit shown as a diff
 * on its target cell with Accept / Reject. Accept and Reject are the run's own approval of that call, bound to
 * the digest of the exact arguments shown: the kernel takes one decision, whichever button is clicked first
 * (here, in the panel's view, or in the cell's view).
 *
 * Everything drawn here is text (textContent): cell sources, the model's arguments and ids never become HTML.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';

import type { CellMark } from '../notebook/protocol';
import { showText } from '../shown';
import { diffNode } from './diff';
import { CHANGED_REASON, proposal } from './proposal';
import { PanelHub, hasError, nameOf, shownName } from './panelComm';
import type { Change, Review } from './protocol';

/** A cell's `nbagent` metadata, when it is a mark the agent left (a saved notebook may hold anything there). */
function markOf(cell: Cell): CellMark | null {
  const mark: unknown = cell.model.getMetadata('nbagent');
  return mark && typeof mark === 'object' && typeof (mark as CellMark).action === 'string' ? (mark as CellMark) : null;
}

export interface IActions {
  fix(cell: Cell): void;
  explain(cell: Cell): void;
  showRun(run: string): void;
}

function button(text: string, cls: string, title: string, onclick: () => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.className = `jp-Button nba-cbtn ${cls}`;
  b.textContent = text;
  b.title = title;
  b.onclick = event => {
    event.stopPropagation();
    onclick();
  };
  return b;
}

function div(cls: string, text?: string): HTMLElement {
  const d = document.createElement('div');
  d.className = cls;
  if (text !== undefined) {
    showText(d, text);  // the model's values (a cell type, a name) among them: hidden characters shown
  }
  return d;
}

export class CellDecorator {
  private frame = 0;
  private hooked = new WeakSet<object>();
  private boxes = new Map<string, { node: HTMLElement; key: string }>();

  constructor(
    private readonly nb: NotebookPanel,
    private readonly hub: PanelHub,
    private readonly actions: IActions
  ) {
    hub.changed.connect(this.schedule, this);
    nb.content.modelContentChanged.connect(this.schedule, this);
    nb.content.model?.cells.changed.connect(this.schedule, this);
    this.schedule();
  }

  dispose(): void {
    this.hub.changed.disconnect(this.schedule, this);
    window.cancelAnimationFrame(this.frame);
  }

  schedule(): void {
    if (this.frame) {
      return;
    }
    this.frame = window.requestAnimationFrame(() => {
      this.frame = 0;
      if (!this.nb.isDisposed) {
        this.update();
      }
    });
  }

  private update(): void {
    const cells = this.nb.content.widgets;
    const reviews = this.pendingEdits();
    const seen = new Set<string>();
    cells.forEach((cell, i) => {
      this.hook(cell);
      this.mark(cell);
      this.errorBar(cell);
      const id = cell.model.id;
      for (const [key, item] of reviews) {
        if (item.target === id || (item.target === null && i === cells.length - 1)) {
          seen.add(key);
          this.reviewBox(cell, i, key, item.run, item.review);
        }
      }
    });
    for (const [key, box] of this.boxes) {
      if (!seen.has(key)) {
        box.node.remove();
        this.boxes.delete(key);
      }
    }
  }

  private hook(cell: Cell): void {
    const model = cell.model;
    if (this.hooked.has(model)) {
      return;
    }
    this.hooked.add(model);
    model.metadataChanged.connect(() => this.schedule());
    if (cell instanceof CodeCell) {
      cell.model.outputs.changed.connect(() => this.schedule());
    }
  }

  /** The notebook edits waiting for a decision, by call: the run, the review, the cell it is shown on. */
  private pendingEdits(): Map<string, { run: string; review: Review; target: string | null }> {
    const out = new Map<string, { run: string; review: Review; target: string | null }>();
    for (const run of this.hub.runs.values()) {
      if (run.before_restart) {
        continue;
      }
      for (const review of run.reviews) {
        const args = review.arguments;
        if (!args) {
          continue;
        }
        const target = review.tool === 'insert_cell' ? (args.after ?? null) : String(args.cell_id ?? '');
        out.set(`${run.id}:${review.call}`, { run: run.id, review, target });
      }
    }
    return out;
  }

  private mark(cell: Cell): void {
    const mark = markOf(cell);
    const host = (cell.node.querySelector('.jp-Cell-inputWrapper') as HTMLElement | null) ?? cell.node;
    let badge = host.querySelector(':scope > .nba-cell-badge') as HTMLElement | null;
    cell.node.classList.toggle('nba-agent-cell', mark !== null);
    if (mark === null) {
      badge?.remove();
      return;
    }
    const run = typeof mark.run === 'string' ? mark.run : '';
    const call = typeof mark.call === 'string' ? mark.call : '';
    const text = `nbagent · ${mark.action}`;
    if (!badge) {
      badge = div('nba-cell-badge');
      host.append(badge);
      badge.addEventListener('click', event => {
        event.stopPropagation();
        const m = markOf(cell);
        if (m && typeof m.run === 'string') {
          this.actions.showRun(m.run);
        }
      });
    }
    if (badge.textContent !== text) {
      badge.textContent = text;
    }
    badge.dataset.run = run;
    badge.dataset.call = call;
    badge.title = `written by nbagent: run ${run || '?'}, call ${call || '?'} (click: show the run in the nbagent panel)`;
  }

  private errorBar(cell: Cell): void {
    let bar = cell.node.querySelector(':scope > .nba-fixbar') as HTMLElement | null;
    if (!hasError(cell)) {
      bar?.remove();
      return;
    }
    if (bar) {
      return;
    }
    bar = div('nba-fixbar');
    bar.append(
      button('Fix with nbagent', 'nba-fix', 'nbagent proposes a fix of this cell, as an edit you review here', () => this.actions.fix(cell)),
      button('Explain', 'nba-explain', 'nbagent explains this error in the panel', () => this.actions.explain(cell))
    );
    cell.node.append(bar);
  }

  private reviewBox(cell: Cell, index: number, key: string, run: string, review: Review): void {
    const source = cell.model.sharedModel.getSource();
    const name = shownName(cell, index);
    const stamp = `${key}:${review.digest}:${name}:${review.tool === 'insert_cell' ? '' : source}`;
    const existing = this.boxes.get(key);
    if (existing && existing.key === stamp && existing.node.parentElement === cell.node) {
      return;
    }
    existing?.node.remove();
    const box = div('nba-review');
    box.dataset.call = review.call;
    box.dataset.run = run;
    const shown = proposal(review, source, name);
    const title = div('nba-review-title', shown.what);
    title.title = `run ${run}, call ${review.call}`;
    box.append(title);
    if (shown.stale) {
      box.classList.add('nba-review-changed');
      box.append(div('nba-review-stale', shown.stale));
    }
    box.append(diffNode(shown.before, shown.after));
    const note = div('nba-review-note');
    const decide = (choice: 'approve' | 'deny') => {
      box.querySelectorAll('button').forEach(b => ((b as HTMLButtonElement).disabled = true));
      note.textContent = choice === 'approve' ? 'Accepting…' : 'Rejecting…';
      const reason = choice === 'approve' ? '' : shown.stale ? CHANGED_REASON : 'rejected on the cell';
      this.hub.decide(run, review, choice, reason).then(result => {
        note.textContent = result && result.taken ? '' : String(result?.why ?? 'already decided');
      }, err => {
        note.textContent = err instanceof Error ? err.message : String(err);
      });
    };
    const buttons = div('nba-review-buttons');
    const accept = button('Accept', 'nba-accept',
      'Approve this call, with exactly these arguments (the same as Approve in the run\'s view)', () => decide('approve'));
    if (shown.stale) {
      accept.disabled = true;
      accept.title = 'The cell changed since nbagent read it: this edit can no longer apply as proposed';
    }
    buttons.append(
      accept,
      button('Reject', 'nba-reject', shown.stale
        ? 'Deny this call: nothing changes; nbagent is told the cell changed, so it can read it again'
        : 'Deny this call: nothing changes; the model is told', () => decide('deny'))
    );
    box.append(buttons, note);
    cell.node.append(box);
    this.boxes.set(key, { node: box, key: stamp });
  }
}

/** Undo one change of a run in the notebook, only while the cell still holds what nbagent left there. */
export function undoChange(nb: NotebookPanel, change: Change): void {
  const notebook = nb.content;
  const shared = nb.model!.sharedModel;
  const index = notebook.widgets.findIndex(w => w.model.id === change.cell_id);
  if (change.action === 'deleted') {
    if (index >= 0) {
      throw new Error(`${change.name} is in the notebook again; nothing was undone`);
    }
    const at = Math.max(0, Math.min(change.index, notebook.widgets.length));
    shared.transact(() => {
      const cellType = change.cell_type === 'markdown' ? 'markdown' : change.cell_type === 'raw' ? 'raw' : 'code';
      shared.insertCell(at, { cell_type: cellType, source: change.before ?? '', id: change.cell_id });
    });
    return;
  }
  if (index < 0) {
    throw new Error(`${change.name} is not in the notebook any more; nothing was undone`);
  }
  const cell = notebook.widgets[index].model.sharedModel;
  if (cell.getSource() !== change.after) {
    throw new Error(`${nameOf(nb, change.cell_id, change.name)} was changed after nbagent ${change.action} it; nothing was undone ` +
      '(undo your own edits with Ctrl+Z in the cell)');
  }
  if (change.action === 'inserted') {
    shared.transact(() => shared.deleteCell(index));
    return;
  }
  if (change.before === null) {
    throw new Error(`what ${nameOf(nb, change.cell_id, change.name)} held before cannot be told for sure; undo it with Ctrl+Z in the cell`);
  }
  const before = change.before;
  cell.transact(() => {
    cell.setSource(before);
    cell.deleteMetadata('nbagent');
  });
}
