/**
 * The page's end of the `nbagent.notebook` comm (kernel side: nbagent/jupyter/notebook/comm.py; the messages
 * in nbagent/jupyter/notebook/protocol.json, typed in ./protocol.ts).
 *
 * The kernel opens the comm and asks; this answers with the live notebook (unsaved edits included), applies
 * edits as one undoable step each (one shared-model transaction), and runs cells through the notebook so their
 * output lands where the person sees it. Every page showing the kernel's notebook answers the hello; the kernel
 * keeps the first, and every later request names it (`client`), so a second view never applies an edit twice.
 */
import { Cell, CodeCell, MarkdownCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { setLiveMark } from '../codeblocks';
import { asJSON } from '../json';
import { cellName, editRefusal, isNotebookId, replaceOnce, staleReason, trimOutput } from './cellEdits';
import type {
  Cell as CellJSON,
  EditResult,
  HelloResult,
  InsertRequest,
  KernelRequest,
  Output,
  PageReply,
  ReadResult,
  Result,
  RunResult,
  SnapshotResult
} from './protocol';
import { keepRendering } from './keptViews';

export const TARGET = 'nbagent.notebook';

export function newClientId(): string {
  return Math.random().toString(36).slice(2) + Date.now().toString(36);
}

function cellJSON(cell: Cell, index: number): CellJSON {
  const model = cell.model;
  const json: CellJSON = {
    id: model.id,
    index,
    cell_type: model.type,
    source: model.sharedModel.getSource(),
    nbagent: model.getMetadata('nbagent') ?? null
  };
  if (cell instanceof CodeCell) {
    json.execution_count = cell.model.executionCount;
    const outputs: Output[] = [];
    for (let i = 0; i < cell.model.outputs.length; i++) {
      outputs.push(trimOutput(cell.model.outputs.get(i).toJSON()));
    }
    json.outputs = outputs;
  }
  return json;
}

function findCell(panel: NotebookPanel, id: string): { cell: Cell; index: number } {
  const widgets = panel.content.widgets;
  for (let i = 0; i < widgets.length; i++) {
    if (widgets[i].model.id === id) {
      return { cell: widgets[i], index: i };
    }
  }
  const known = widgets.map(w => w.model.id).slice(0, 40).join(', ');
  throw new Error(`there is no cell with id ${JSON.stringify(id)} in ${panel.context.path} (its cells: ${known})`);
}

/**
 * Bring a cell the agent touched into view, without selecting or focusing it (the person may be typing
 * elsewhere: their keystrokes must stay where they are), and not at all while they edit a cell.
 */
function reveal(panel: NotebookPanel, cell: Cell): void {
  const notebook = panel.content;
  if (notebook.mode === 'edit') {
    return;
  }
  const index = notebook.widgets.indexOf(cell);
  if (index >= 0) {
    void notebook.scrollToItem(index, 'smart').catch(() => undefined);
  }
}

/** A cell as the person sees it (`[8] by_region = ...`): refusals name it so, with its id. */
function nameIn(cell: Cell, index: number): string {
  return cellName({ number: index + 1, cell_type: cell.model.type, source: cell.model.sharedModel.getSource(),
    execution_count: cell instanceof CodeCell ? (cell.model.executionCount ?? null) : null });
}

function checkExpected(cell: Cell, index: number, expected: string | null | undefined): void {
  const why = staleReason(cell.model.id, cell.model.sharedModel.getSource(), expected, nameIn(cell, index));
  if (why !== null) {
    throw new Error(why);
  }
}

/**
 * The notebook's own id, kept in its metadata (`nbagent.id`; made the first time the kernel asks): it follows
 * the notebook through renames, so the conversations stored for it stay its own.
 */
function notebookId(panel: NotebookPanel): string {
  const model = panel.model!;
  const found: unknown = model.getMetadata('nbagent');
  const mark = found && typeof found === 'object' && !Array.isArray(found) ? (found as { [key: string]: unknown }) : {};
  if (isNotebookId(mark.id)) {
    return mark.id;
  }
  const id = typeof crypto !== 'undefined' && 'randomUUID' in crypto ? crypto.randomUUID() : newClientId() + newClientId();
  model.setMetadata('nbagent', { ...mark, id });
  return id;
}

/** One comm the kernel opened: answers its requests for the notebook this kernel serves. */
export class NotebookComm {
  readonly client = newClientId();

  constructor(
    private readonly comm: Kernel.IComm,
    private readonly panels: () => NotebookPanel[],
    private readonly tracker: INotebookTracker
  ) {
    // Not awaited: the kernel connection handles its messages one after another, and a run request waits
    // for the execute reply, which would otherwise queue behind this handler forever.
    comm.onMsg = msg => {
      void this.onMsg(msg);
    };
  }

  /** The panel this kernel serves: the current one if it is among them, else the first still open. */
  panel(): NotebookPanel {
    const panels = this.panels().filter(p => !p.isDisposed);
    const current = this.tracker.currentWidget;
    if (current && panels.includes(current)) {
      return current;
    }
    if (!panels.length) {
      throw new Error('the notebook was closed');
    }
    return panels[0];
  }

  private reply(message: PageReply): void {
    if (!this.comm.isDisposed) {
      this.comm.send(asJSON(message));
    }
  }

  private async onMsg(msg: KernelMessage.ICommMsgMsg): Promise<void> {
    const data = msg.content.data as unknown as KernelRequest;
    if ('client' in data && data.client && data.client !== this.client) {
      return; // meant for another view of this kernel
    }
    try {
      this.reply({ id: data.id, ok: true, result: await this.handle(data) });
    } catch (err) {
      this.reply({ id: data.id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  }

  private async handle(data: KernelRequest): Promise<Result> {
    const panel = this.panel();
    switch (data.op) {
      case 'hello': {
        for (const shown of this.panels()) {
          setLiveMark(shown, data.mark); // only the live kernel sends a hello: its blocks get Copy and Insert
        }
        const app = document.body.dataset.notebook ? 'notebook' : 'lab';
        const result: HelloResult = { client: this.client, path: panel.context.path, app, notebook_id: notebookId(panel) };
        return result;
      }
      case 'snapshot': {
        const html = typeof data.html === 'string' ? data.html : null;
        const text = typeof data.text === 'string' ? data.text : null;
        if (!keepRendering(panel, String(data.model_id), html, text)) {
          throw new Error(`no output shows the widget ${data.model_id} in ${panel.context.path}`);
        }
        const result: SnapshotResult = { kept: html !== null };
        return result;
      }
      case 'read': {
        const cells = panel.content.widgets.map((w, i) => cellJSON(w, i));
        const result: ReadResult = { path: panel.context.path, dirty: panel.context.model.dirty, cells };
        return result;
      }
      case 'insert':
        return this.insert(panel, data);
      case 'edit': {
        const { cell, index } = findCell(panel, String(data.cell_id));
        checkExpected(cell, index, data.expected);
        const old = String(data.old);
        const done = replaceOnce(cell.model.sharedModel.getSource(), old, String(data.new));
        if (!done.ok) {
          throw new Error(editRefusal(cell.model.id, done.why, nameIn(cell, index)));
        }
        // the cell's own transaction: its undo history (what Ctrl+Z in the cell undoes) takes it as one step
        const cellModel = cell.model.sharedModel;
        const mark = data.mark;
        cellModel.transact(() => {
          cellModel.updateSource(done.at, done.at + old.length, String(data.new));
          if (mark) {
            cellModel.setMetadata('nbagent', asJSON(mark));
          }
        });
        reveal(panel, cell);
        const result: EditResult = { cell_id: cell.model.id, index, source: cell.model.sharedModel.getSource() };
        return result;
      }
      case 'delete': {
        const { cell, index } = findCell(panel, String(data.cell_id));
        checkExpected(cell, index, data.expected);
        const source = cell.model.sharedModel.getSource();
        const shared = panel.model!.sharedModel;
        shared.transact(() => {
          shared.deleteCell(index);
        });
        const result: EditResult = { cell_id: data.cell_id, index, source };
        return result;
      }
      case 'run':
        return this.run(panel, data.cell_id, data.expected);
      default:
        throw new Error(`unknown request ${JSON.stringify((data as { op?: unknown }).op)}`);
    }
  }

  private insert(panel: NotebookPanel, data: InsertRequest): Result {
    const notebook = panel.content;
    const shared = panel.model!.sharedModel;
    let index = notebook.widgets.length;
    if (data.after) {
      index = findCell(panel, String(data.after)).index + 1;
    }
    if (!['code', 'markdown', 'raw'].includes(data.cell_type)) {
      throw new Error(`cell_type must be code, markdown or raw, not ${JSON.stringify(data.cell_type)}`);
    }
    const made: { id?: string } = {};
    shared.transact(() => {
      made.id = shared.insertCell(index, {
        cell_type: data.cell_type,
        source: String(data.source ?? ''),
        metadata: data.mark ? { nbagent: asJSON(data.mark) } : {}
      }).id;
    });
    reveal(panel, notebook.widgets[index]);
    const id = made.id ?? notebook.widgets[index].model.id;
    return { cell_id: id, index, count: notebook.widgets.length };
  }

  private async run(panel: NotebookPanel, cellId: string, expected: string | null | undefined): Promise<RunResult> {
    const { cell, index } = findCell(panel, String(cellId));
    checkExpected(cell, index, expected); // the code that was approved, and nothing else
    reveal(panel, cell);
    if (cell instanceof MarkdownCell) {
      cell.rendered = true;
      return { cell: cellJSON(cell, index), status: 'ok' };
    }
    if (!(cell instanceof CodeCell)) {
      return { cell: cellJSON(cell, index), status: 'ok' };
    }
    const reply = await CodeCell.execute(cell, panel.sessionContext);
    const status = reply ? reply.content.status : 'aborted';
    if (cell.isDisposed) {
      throw new Error(`cell ${cellId} was deleted while it ran`);
    }
    return { cell: cellJSON(cell, findCell(panel, String(cellId)).index), status };
  }

  close(): void {
    if (!this.comm.isDisposed) {
      try {
        this.comm.close();
      } catch {
        /* already gone */
      }
    }
  }
}
