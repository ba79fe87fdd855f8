/**
 * The agent's changes in the panel: per run (its card's "Changes", with Undo and Undo all), and one review of
 * every change of the conversation shown (./sidebar.ts draws it above the prompt box of ./promptbox.ts): each
 * change made and each proposed edit waiting for a decision, linked to its cell (a click scrolls to it), with
 * **Keep all** (accepts every proposed edit that still applies, each bound to the digest of the exact arguments
 * shown, and keeps what was changed) and **Undo all** (rejects the proposed edits and puts back every change, the
 * latest first, each only while its cell still holds what nbagent left). Per change, Accept / Reject (on a
 * proposal) and Undo (on a change) stay.
 *
 * Everything drawn is text (textContent): cell sources, the model's arguments and ids never become HTML.
 */
import { NotebookPanel } from '@jupyterlab/notebook';

import { undoAll, undoSummary } from './changes';
import { PanelHub, ShownRun, nameOf } from './panelComm';
import { CHANGED_REASON, proposal } from './proposal';
import type { Change, Review } from './protocol';
import { undoChange } from './review';
import { el } from './el';

/** What the lists need from the panel: the notebook and its hub, a way to say what went wrong, a redraw. */
export type Host = { hub: PanelHub; nb: NotebookPanel; error: (text: string) => void; redraw: () => void };

function button(text: string, cls: string, title: string, onclick: (b: HTMLButtonElement) => void): HTMLButtonElement {
  const b = el('button', `jp-Button ${cls}`, text) as HTMLButtonElement;
  b.title = title;
  b.onclick = () => onclick(b);
  return b;
}

function cellLink(cellId: string, text: string): HTMLAnchorElement {
  const link = el('a', 'nba-panel-change-link', text) as HTMLAnchorElement;
  link.href = `#nbagent-cell=${encodeURIComponent(cellId)}`; // the notebook part scrolls to the cell
  link.title = 'Show the cell';
  return link;
}

const key = (run: string, call: string) => `${run}:${call}`;

/** One change made: what, to which cell (a link), and Undo, or that it was undone or kept. */
function changeRow(run: ShownRun, change: Change, host: Host): HTMLElement {
  const row = el('div', 'nba-panel-change');
  row.dataset.call = change.call;
  row.append(cellLink(change.cell_id, `${change.action} ${nameOf(host.nb, change.cell_id, change.name)}`));
  if (change.undone) {
    row.append(el('span', 'nba-panel-undone', ' · undone'));
  } else if (host.hub.kept.has(key(run.id, change.call))) {
    row.append(el('span', 'nba-panel-kept', ' · kept'));
  } else {
    row.append(button('Undo', 'nba-panel-undo',
      'Put the cell back as it was before this change (only while it still holds what nbagent left)',
      b => undoOne(host, run, change, b)));
  }
  return row;
}

/** A run's card: its changes, with Undo all when there are two or more to undo. */
export function runChanges(target: HTMLElement, run: ShownRun, host: Host): void {
  target.textContent = '';
  if (!run.changes.length) {
    return;
  }
  const title = el('div', 'nba-panel-changes-title', `Changes (${run.changes.length})`);
  if (run.changes.filter(c => !c.undone).length > 1) {
    title.append(button('Undo all', 'nba-panel-undo-all',
      'Put back every cell this run changed, the latest change first (each only while it still holds what nbagent left)',
      b => {
        b.disabled = true;
        undoEvery(host, [run]);
      }));
  }
  target.append(title);
  for (const change of run.changes) {
    target.append(changeRow(run, change, host));
  }
}

function undoOne(host: Host, run: ShownRun, change: Change, b: HTMLButtonElement): void {
  b.disabled = true;
  try {
    undoChange(host.nb, change);
  } catch (err) {
    b.disabled = false;
    host.error(err instanceof Error ? err.message : String(err));
    return;
  }
  change.undone = true;
  host.redraw();
  host.hub.undone(run.id, change.call).catch(err => host.error(String(err)));
}

/** Undo every change of these runs, the latest first (across runs: a later run's changes first). */
function undoEvery(host: Host, runs: readonly ShownRun[]): void {
  const owner = new Map<Change, ShownRun>();
  const all: Change[] = [];
  for (const run of runs) {
    for (const change of run.changes) {
      if (!host.hub.kept.has(key(run.id, change.call))) {
        owner.set(change, run);
        all.push(change);
      }
    }
  }
  const outcome = undoAll(all, change => undoChange(host.nb, change));
  for (const change of outcome.undone) {
    change.undone = true;
    host.hub.undone(owner.get(change)!.id, change.call).catch(err => host.error(String(err)));
  }
  host.redraw();
  const stopped = undoSummary(outcome);
  if (stopped !== null) {
    host.error(stopped);
  }
}

/** The notebook edits waiting for a decision in these runs, with what each would do to its cell now. */
export function pendingEdits(runs: readonly ShownRun[], nb: NotebookPanel): { run: ShownRun; review: Review; cell: string; what: string; stale: string | null }[] {
  const out = [];
  const cells = nb.content.widgets;
  for (const run of runs) {
    if (run.before_restart) {
      continue;
    }
    for (const review of run.reviews) {
      if (!review.arguments) {
        continue; // not a notebook edit
      }
      const cellId = review.tool === 'insert_cell' ? String(review.arguments.after ?? '') : String(review.arguments.cell_id ?? '');
      const cell = cells.find(w => w.model.id === cellId);
      const name = nameOf(nb, cellId, cellId ? 'a cell' : 'the end of the notebook');
      const shown = proposal(review, cell ? cell.model.sharedModel.getSource() : '', name);
      out.push({ run, review, cell: cellId, what: shown.what.replace(/^nbagent proposes /, 'proposed: '), stale: shown.stale });
    }
  }
  return out;
}

/** The conversation's review: every change made and every edit proposed, Keep all and Undo all. */
export function conversationReview(target: HTMLElement, runs: readonly ShownRun[], host: Host): void {
  target.textContent = '';
  const pending = pendingEdits(runs, host.nb);
  const made: { run: ShownRun; change: Change }[] = [];
  for (const run of runs) {
    for (const change of run.changes) {
      made.push({ run, change });
    }
  }
  const open = made.filter(m => !m.change.undone && !host.hub.kept.has(key(m.run.id, m.change.call)));
  if (!pending.length && !open.length) {
    return; // nothing to review (undone and kept changes stay listed in their runs' cards)
  }
  const parts = [pending.length ? `${pending.length} proposed` : '',
    open.length ? `${open.length} change${open.length === 1 ? '' : 's'} made` : ''].filter(Boolean);
  const title = el('div', 'nba-panel-changes-title nba-panel-review-title', `Review: ${parts.join(', ')}`);
  const keep = button('Keep all', 'nba-panel-keep-all',
    'Accept every proposed edit that still applies (each exactly as shown) and keep every change made', b => {
      b.disabled = true;
      keepAll(host, pending, open.map(m => key(m.run.id, m.change.call)));
    });
  const undo = button('Undo all', 'nba-panel-review-undo-all',
    'Reject every proposed edit and put back every cell changed, the latest change first (each only while it ' +
    'still holds what nbagent left; your own edits are never undone)', b => {
      b.disabled = true;
      for (const p of pending) {
        void decide(host, p.run, p.review, 'deny', p.stale ? CHANGED_REASON : 'rejected in the review of all changes');
      }
      undoEvery(host, runs);
    });
  title.append(keep, undo);
  target.append(title);
  for (const p of pending) {
    const row = el('div', 'nba-panel-proposed');
    row.dataset.call = p.review.call;
    row.append(p.cell ? cellLink(p.cell, p.what) : el('span', '', p.what));
    if (p.stale) {
      row.append(el('span', 'nba-panel-stale', ' · its cell changed'));
      row.title = p.stale;
    }
    const accept = button('Accept', 'nba-panel-accept', 'Approve this edit, exactly as proposed (as Accept on its cell)',
      () => void decide(host, p.run, p.review, 'approve'));
    accept.disabled = p.stale !== null;
    row.append(accept, button('Reject', 'nba-panel-reject', 'Deny this edit: nothing changes; nbagent is told',
      () => void decide(host, p.run, p.review, 'deny', p.stale ? CHANGED_REASON : 'rejected in the review of all changes')));
    target.append(row);
  }
  for (const { run, change } of open) {
    target.append(changeRow(run, change, host));
  }
}

async function decide(host: Host, run: ShownRun, review: Review, choice: 'approve' | 'deny', reason = ''): Promise<boolean> {
  try {
    const result = await host.hub.decide(run.id, review, choice, reason);
    if (!result.taken) {
      host.error(String(result.why ?? 'already decided'));
    }
    return result.taken;
  } catch (err) {
    host.error(err instanceof Error ? err.message : String(err));
    return false;
  }
}

async function keepAll(host: Host, pending: ReturnType<typeof pendingEdits>, made: string[]): Promise<void> {
  for (const k of made) {
    host.hub.kept.add(k);
  }
  const skipped = pending.filter(p => p.stale !== null);
  for (const p of pending) {
    if (p.stale === null && await decide(host, p.run, p.review, 'approve')) {
      host.hub.kept.add(key(p.run.id, p.review.call)); // the change it makes is kept too
    }
  }
  host.redraw();
  if (skipped.length) {
    host.error(`Kept all but ${skipped.length} proposed edit${skipped.length === 1 ? '' : 's'} whose cell you changed ` +
      'since nbagent read it: reject those, or undo your change (Ctrl+Z) to accept them.');
  }
}
