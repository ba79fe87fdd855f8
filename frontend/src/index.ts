/**
 * nbagent's frontend part (JupyterLab 4 and Notebook 7).
 *
 * The kernel opens a comm with target `nbagent.notebook` and asks; this answers with the live notebook
 * (unsaved edits included), applies edits as one undoable step each (one shared-model transaction), and
 * runs cells through the notebook so their output lands where the user sees it. The protocol is described
 * in nbagent/jupyter/notebook_comm.py. It also makes links to `#nbagent-cell=<id>` scroll to that cell, and
 * gives the model's code blocks in the outputs Copy and Insert as cell buttons (codeblocks.ts).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Cell, CodeCell, MarkdownCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { belowItsCell, watchCodeBlocks } from './codeblocks';
import { panelPlugin } from './plugin';
import { followRuns, keepRendering } from './runs';

const TARGET = 'nbagent.notebook';
const TEXT_LIMIT = 20000;
const HTML_LIMIT = 4000;

type JSONDict = { [key: string]: any };

/** Which panels show which kernel connection (two views of one notebook share one). */
const panelsByKernel = new WeakMap<Kernel.IKernelConnection, Set<NotebookPanel>>();

function newClientId(): string {
  return Math.random().toString(36).slice(2) + Date.now().toString(36);
}

function trimOutput(output: JSONDict): JSONDict {
  const out: JSONDict = { ...output };
  if (typeof out.text === 'string' && out.text.length > TEXT_LIMIT) {
    out.text = out.text.slice(0, TEXT_LIMIT / 2) + '\n…\n' + out.text.slice(-TEXT_LIMIT / 2);
    out.truncated = true;
  } else if (Array.isArray(out.text)) {
    out.text = out.text.join('');
    return trimOutput(out);
  }
  if (out.data && typeof out.data === 'object') {
    const data: JSONDict = {};
    for (const [mime, value] of Object.entries(out.data as JSONDict)) {
      let v: any = Array.isArray(value) ? value.join('') : value;
      if (mime.startsWith('image/') || mime.startsWith('video/') || mime === 'application/pdf') {
        v = null; // the kernel only says "an image"
      } else if (mime === 'text/html' && typeof v === 'string' && v.length > HTML_LIMIT) {
        // keep both ends: pandas puts "N rows × M columns" at the end
        v = v.slice(0, HTML_LIMIT / 2) + v.slice(-HTML_LIMIT / 2);
      } else if (typeof v === 'string' && v.length > TEXT_LIMIT) {
        v = v.slice(0, TEXT_LIMIT);
      } else if (typeof v !== 'string') {
        const s = JSON.stringify(v);
        v = s && s.length > TEXT_LIMIT ? null : v;
      }
      data[mime] = v;
    }
    out.data = data;
  }
  if (Array.isArray(out.traceback)) {
    out.traceback = out.traceback.slice(-12);
  }
  return out;
}

function cellJSON(cell: Cell, index: number): JSONDict {
  const model = cell.model;
  const json: JSONDict = {
    id: model.id,
    index,
    cell_type: model.type,
    source: model.sharedModel.getSource(),
    nbagent: model.getMetadata('nbagent') ?? null
  };
  if (model.type === 'code') {
    const code = cell as CodeCell;
    json.execution_count = code.model.executionCount;
    const outputs: JSONDict[] = [];
    for (let i = 0; i < code.model.outputs.length; i++) {
      outputs.push(trimOutput(code.model.outputs.get(i).toJSON() as JSONDict));
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

function checkExpected(cell: Cell, expected: unknown): void {
  if (typeof expected !== 'string') {
    return;
  }
  const now = cell.model.sharedModel.getSource();
  if (now !== expected) {
    throw new Error(
      `cell ${cell.model.id} changed since you last read it (someone edited it meanwhile); nothing was done. ` +
        'Read it again with read_notebook and base the change on what it holds now.'
    );
  }
}

/**
 * The notebook's own id, kept in its metadata (`nbagent.id`; made the first time the kernel asks): it follows
 * the notebook through renames, so the conversations stored for it stay its own.
 */
function notebookId(panel: NotebookPanel): string {
  const model = panel.model!;
  const mark = (model.getMetadata('nbagent') as JSONDict | undefined) ?? {};
  if (typeof mark.id === 'string' && /^[A-Za-z0-9_-]{8,64}$/.test(mark.id)) {
    return mark.id;
  }
  const id = typeof crypto !== 'undefined' && 'randomUUID' in crypto ? crypto.randomUUID() : newClientId() + newClientId();
  model.setMetadata('nbagent', { ...mark, id });
  return id;
}

class Answerer {
  readonly client = newClientId();
  private comm: Kernel.IComm;
  private kernel: Kernel.IKernelConnection;
  private tracker: INotebookTracker;

  constructor(comm: Kernel.IComm, kernel: Kernel.IKernelConnection, tracker: INotebookTracker) {
    this.comm = comm;
    this.kernel = kernel;
    this.tracker = tracker;
    // Not awaited: the kernel connection handles its messages one after another, and a run request waits
    // for the execute reply, which would otherwise queue behind this handler forever.
    comm.onMsg = msg => {
      void this.onMsg(msg);
    };
  }

  /** The panel this kernel serves: the current one if it is among them, else the first still open. */
  panel(): NotebookPanel {
    const panels = [...(panelsByKernel.get(this.kernel) ?? [])].filter(p => !p.isDisposed);
    const current = this.tracker.currentWidget;
    if (current && panels.includes(current)) {
      return current;
    }
    if (!panels.length) {
      throw new Error('the notebook was closed');
    }
    return panels[0];
  }

  private reply(id: number, ok: boolean, payload: any): void {
    if (this.comm.isDisposed) {
      return;
    }
    this.comm.send(ok ? { id, ok: true, result: payload } : { id, ok: false, error: String(payload) });
  }

  private async onMsg(msg: KernelMessage.ICommMsgMsg): Promise<void> {
    const data = msg.content.data as JSONDict;
    const id = data.id as number;
    if (data.client && data.client !== this.client) {
      return; // meant for another view of this kernel
    }
    try {
      const result = await this.handle(data);
      this.reply(id, true, result);
    } catch (err) {
      this.reply(id, false, err instanceof Error ? err.message : String(err));
    }
  }

  private async handle(data: JSONDict): Promise<any> {
    const panel = this.panel();
    const notebook = panel.content;
    const shared = panel.model!.sharedModel;
    switch (data.op) {
      case 'hello': {
        const app = document.body.dataset.notebook ? 'notebook' : 'lab';
        return { client: this.client, path: panel.context.path, app, notebook_id: notebookId(panel) };
      }
      case 'snapshot': {
        const html = typeof data.html === 'string' ? data.html : null;
        const text = typeof data.text === 'string' ? data.text : null;
        if (!keepRendering(panel, String(data.model_id), html, text)) {
          throw new Error(`no output shows the widget ${data.model_id} in ${panel.context.path}`);
        }
        return { kept: html !== null };
      }
      case 'read': {
        const cells = notebook.widgets.map((w, i) => cellJSON(w, i));
        return { path: panel.context.path, dirty: panel.context.model.dirty, cells };
      }
      case 'insert': {
        let index = notebook.widgets.length;
        if (data.after) {
          index = findCell(panel, String(data.after)).index + 1;
        }
        if (!['code', 'markdown', 'raw'].includes(data.cell_type)) {
          throw new Error(`cell_type must be code, markdown or raw, not ${JSON.stringify(data.cell_type)}`);
        }
        let made: any = null;
        shared.transact(() => {
          made = shared.insertCell(index, {
            cell_type: data.cell_type,
            source: String(data.source ?? ''),
            metadata: data.mark ? { nbagent: data.mark } : {}
          } as any);
        });
        reveal(panel, notebook.widgets[index]);
        return { cell_id: made?.id ?? notebook.widgets[index].model.id, index, count: notebook.widgets.length };
      }
      case 'edit': {
        const { cell, index } = findCell(panel, String(data.cell_id));
        checkExpected(cell, data.expected);
        const source = cell.model.sharedModel.getSource();
        const old = String(data.old);
        const at = source.indexOf(old);
        if (at < 0 || !old) {
          throw new Error(`the text to replace is not in cell ${cell.model.id} any more; nothing was done`);
        }
        if (source.indexOf(old, at + 1) >= 0) {
          throw new Error(`the text to replace occurs more than once in cell ${cell.model.id}; nothing was done`);
        }
        // the cell's own transaction: its undo history (what Ctrl+Z in the cell undoes) takes it as one step
        const cellModel = cell.model.sharedModel;
        cellModel.transact(() => {
          cellModel.updateSource(at, at + old.length, String(data.new));
          if (data.mark) {
            cellModel.setMetadata('nbagent', data.mark);
          }
        });
        reveal(panel, cell);
        return { cell_id: cell.model.id, index, source: cell.model.sharedModel.getSource() };
      }
      case 'delete': {
        const { cell, index } = findCell(panel, String(data.cell_id));
        checkExpected(cell, data.expected);
        const source = cell.model.sharedModel.getSource();
        shared.transact(() => {
          shared.deleteCell(index);
        });
        return { cell_id: data.cell_id, index, source };
      }
      case 'run': {
        const { cell, index } = findCell(panel, String(data.cell_id));
        checkExpected(cell, data.expected); // the code that was approved, and nothing else
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
          throw new Error(`cell ${data.cell_id} was deleted while it ran`);
        }
        return { cell: cellJSON(cell, findCell(panel, String(data.cell_id)).index), status };
      }
      default:
        throw new Error(`unknown request ${JSON.stringify(data.op)}`);
    }
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

/** Scroll to the cell a `#nbagent-cell=<id>` link names, in the notebook the link is in. */
function onLinkClick(tracker: INotebookTracker, event: MouseEvent): void {
  const target = event.target as HTMLElement | null;
  const link = target?.closest?.('a[href^="#nbagent-cell="]') as HTMLAnchorElement | null;
  if (!link) {
    return;
  }
  event.preventDefault();
  event.stopPropagation();
  const id = decodeURIComponent(link.getAttribute('href')!.slice('#nbagent-cell='.length));
  const host = link.closest('.jp-NotebookPanel');
  let panel: NotebookPanel | null = null;
  tracker.forEach(p => {
    if (p.node === host) {
      panel = p;
    }
  });
  panel = panel ?? tracker.currentWidget;
  if (!panel) {
    return;
  }
  const notebook = (panel as NotebookPanel).content;
  const index = notebook.widgets.findIndex(w => w.model.id === id);
  if (index < 0) {
    return;
  }
  notebook.activeCellIndex = index;
  notebook.mode = 'command';
  void notebook.scrollToCell(notebook.widgets[index], 'center').catch(() => undefined);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbagent:notebook',
  description: 'Lets nbagent, in the kernel, read and edit the live notebook and run its cells.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const answerers = new WeakMap<Kernel.IKernelConnection, Set<Answerer>>();

    const attach = (panel: NotebookPanel, kernel: Kernel.IKernelConnection | null | undefined) => {
      if (!kernel) {
        return;
      }
      let panels = panelsByKernel.get(kernel);
      if (!panels) {
        panels = new Set();
        panelsByKernel.set(kernel, panels);
        kernel.registerCommTarget(TARGET, comm => {
          const answerer = new Answerer(comm, kernel, tracker);
          let set = answerers.get(kernel);
          if (!set) {
            set = new Set();
            answerers.set(kernel, set);
          }
          set.add(answerer);
          comm.onClose = () => {
            set!.delete(answerer);
          };
          // the kernel's hello follows as the comm's first message
        });
      }
      panels.add(panel);
    };

    const detach = (panel: NotebookPanel, kernel: Kernel.IKernelConnection | null | undefined) => {
      if (!kernel) {
        return;
      }
      const panels = panelsByKernel.get(kernel);
      panels?.delete(panel);
      if (panels && [...panels].every(p => p.isDisposed)) {
        // the notebook went away: tell the kernel at once rather than let it wait
        for (const answerer of answerers.get(kernel) ?? []) {
          answerer.close();
        }
        answerers.delete(kernel);
      }
    };

    const kernelOf = new WeakMap<NotebookPanel, Kernel.IKernelConnection>();
    const follow = (panel: NotebookPanel, kernel: Kernel.IKernelConnection | null | undefined) => {
      detach(panel, kernelOf.get(panel));
      kernelOf.delete(panel);
      if (kernel) {
        kernelOf.set(panel, kernel);
        attach(panel, kernel);
      }
    };
    tracker.widgetAdded.connect((_sender, panel) => {
      followRuns(panel);
      const stopWatching = watchCodeBlocks(panel.content.node, belowItsCell(panel)); // Copy, Insert as cell
      panel.disposed.connect(() => stopWatching());
      const session = panel.sessionContext;
      follow(panel, session.session?.kernel);
      session.kernelChanged.connect((_s, change) => follow(panel, change.newValue));
      panel.disposed.connect(() => follow(panel, null));
    });

    document.addEventListener('click', event => onLinkClick(tracker, event), true);
  }
};

export default [plugin, panelPlugin];
