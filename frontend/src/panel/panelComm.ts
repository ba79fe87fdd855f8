/**
 * The page's end of the `nbagent.panel` comm (kernel side: nbagent/jupyter/panel/hub.py; the messages in
 * nbagent/jupyter/panel/protocol.json, typed in ./protocol.ts): one per open notebook. It opens the comm when
 * the notebook has a kernel, asks for the conversation, keeps the runs' summaries the kernel pushes, sends the
 * person's decisions, and says what is wrong when nobody answers: no kernel, nbagent not loaded in it, the
 * kernel restarted (the runs it showed are kept, marked as from before the restart).
 *
 * Everything the kernel sends is data: summaries are JSON; the HTML in them is sanitized where it is shown.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import { Notebook, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';

import { setLiveMark } from '../codeblocks';
import { cellName } from '../notebook/cellEdits';
import type {
  CellPayload,
  CellPayloadOutput,
  Choice,
  KernelMessage as Message,
  PageRequest,
  Results,
  RunSummary,
  Settings,
  StartKind,
  StoredConversation
} from './protocol';

export const TARGET = 'nbagent.panel';
const TIMEOUT = 15000;

/** A run as the panel shows it: the kernel's summary, and whether the kernel restarted after it. */
export type ShownRun = RunSummary & { before_restart?: boolean };

/** A request's own fields (without the id and op the hub adds). */
type Fields<O extends PageRequest['op']> = Omit<Extract<PageRequest, { op: O }>, 'id' | 'op'>;

export type HubState = 'connecting' | 'ready' | 'absent' | 'nokernel';

export class PanelHub {
  readonly changed = new Signal<PanelHub, void>(this);
  readonly notebook: NotebookPanel;
  state: HubState = 'connecting';
  runs = new Map<string, ShownRun>();
  stored: StoredConversation | null = null;
  config: Partial<Settings> = {};
  sessionId: string | null = null;
  kernelOrigin: string | null = null;
  restarted = false;
  error = '';
  /** A stored conversation the person picked from the list: shown, and the next prompt continues it. */
  picked: StoredConversation | null = null;
  /** "New chat" was clicked: the next prompt starts a conversation. */
  fresh = false;
  /** The runs of other conversations, not shown since the person picked one or started a new chat. */
  hidden = new Set<string>();
  /** The changes the person kept (Keep all), as "run:call": no Undo is offered for them any more. */
  kept = new Set<string>();
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private ids = 1;
  private waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private retryTimer = 0;

  constructor(notebook: NotebookPanel) {
    this.notebook = notebook;
    const session = notebook.sessionContext;
    session.kernelChanged.connect(() => this.reconnect());
    session.statusChanged.connect((_s, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        this.onRestart();
      } else if (status === 'idle') {
        this.retrySoon(); // the cell that just ran may have loaded nbagent, or changed its settings
      }
    });
    void session.ready.then(() => this.reconnect());
  }

  dispose(): void {
    this.closeComm();
    window.clearTimeout(this.retryTimer);
  }

  private emit(): void {
    this.changed.emit();
  }

  private onRestart(): void {
    this.restarted = true;
    for (const run of this.runs.values()) {
      run.before_restart = true;
      run.widget = null;
      run.reviews = [];
    }
    this.closeComm();
    this.state = 'connecting';
    this.emit();
  }

  private retrySoon(): void {
    window.clearTimeout(this.retryTimer);
    this.retryTimer = window.setTimeout(() => {
      if (this.state === 'ready') {
        if (this.runs.size === 0) {
          void this.refresh(); // the settings shown before the first run (a later cell may set the model)
        }
      } else if (this.state !== 'connecting' || !this.comm) {
        this.reconnect();
      }
    }, 300);
  }

  private closeComm(): void {
    const comm = this.comm;
    this.comm = null;
    for (const w of this.waiting.values()) {
      w.reject(new Error('the kernel went away before it answered'));
    }
    this.waiting.clear();
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        /* gone */
      }
    }
  }

  reconnect(): void {
    this.closeComm();
    const kernel = this.notebook.sessionContext.session?.kernel ?? null;
    this.kernel = kernel;
    if (!kernel) {
      this.state = 'nokernel';
      this.emit();
      return;
    }
    this.state = 'connecting';
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(TARGET);
    } catch (err) {
      this.state = 'absent';
      this.error = String(err);
      this.emit();
      return;
    }
    this.comm = comm;
    comm.onMsg = msg => this.onMsg(msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
        this.state = this.kernel ? 'absent' : 'nokernel';
        for (const w of this.waiting.values()) {
          w.reject(new Error('nbagent is not loaded in this kernel'));
        }
        this.waiting.clear();
        this.emit();
      }
    };
    comm.open({ protocol: 1 });
    void this.refresh();
  }

  async refresh(): Promise<void> {
    try {
      const state = await this.request('state', {});
      this.state = 'ready';
      this.error = '';
      this.config = state.config ?? {};
      this.stored = state.stored ?? null;
      this.sessionId = state.session_id ?? null;
      if (this.kernelOrigin && state.kernel !== this.kernelOrigin) {
        this.restarted = true;
      }
      this.kernelOrigin = state.kernel ?? null;
      setLiveMark(this.notebook, state.mark); // this kernel's code blocks in the notebook get Copy and Insert
      const fresh = new Map<string, ShownRun>();
      if (this.restarted && !(state.stored && !state.runs.length)) {
        // until the kernel shows the stored conversation, keep what was shown before the restart
        for (const [id, run] of this.runs) {
          fresh.set(id, { ...run, before_restart: true, widget: null, reviews: [] });
        }
      }
      for (const run of state.runs) {
        fresh.set(run.id, run);
      }
      this.runs = fresh;
    } catch (err) {
      if (this.state === 'connecting' && this.comm) {
        this.state = 'absent';
      }
      this.error = err instanceof Error ? err.message : String(err);
    }
    this.emit();
  }

  private onMsg(msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as unknown as Message;
    if (!data || typeof data !== 'object') {
      return;
    }
    if ('ok' in data) {
      if (typeof data.id !== 'number') {
        return;
      }
      const w = this.waiting.get(data.id);
      if (w) {
        this.waiting.delete(data.id);
        if (data.ok) {
          w.resolve(data.result);
        } else {
          w.reject(new Error(String(data.error ?? 'refused')));
        }
      }
      return;
    }
    if (data.event === 'run' && data.run && typeof data.run.id === 'string') {
      this.runs.set(data.run.id, data.run);
      this.emit();
    }
  }

  request<O extends PageRequest['op']>(op: O, fields: Fields<O>): Promise<Results[O]> {
    const comm = this.comm;
    if (!comm || comm.isDisposed) {
      return Promise.reject(new Error(this.absentText()));
    }
    const id = this.ids++;
    return new Promise<Results[O]>((resolve, reject) => {
      const timer = window.setTimeout(() => {
        if (this.waiting.delete(id)) {
          reject(new Error(`the kernel did not answer within ${TIMEOUT / 1000} s (is it busy running a cell?)`));
        }
      }, TIMEOUT);
      this.waiting.set(id, {
        resolve: v => {
          window.clearTimeout(timer);
          resolve(v as Results[O]);
        },
        reject: e => {
          window.clearTimeout(timer);
          reject(e);
        }
      });
      comm.send({ id, op, ...fields });
    });
  }

  absentText(): string {
    if (this.state === 'nokernel') {
      return 'This notebook has no kernel: choose one (Kernel > Change Kernel), then run %load_ext nbagent in it.';
    }
    return 'nbagent is not loaded in this notebook\'s kernel: run %load_ext nbagent in a cell (or click Load nbagent).';
  }

  /** Run `%load_ext nbagent` in the kernel, silently (the person clicked "Load nbagent"). */
  async loadExtension(): Promise<void> {
    const kernel = this.notebook.sessionContext.session?.kernel;
    if (!kernel) {
      throw new Error(this.absentText());
    }
    const future = kernel.requestExecute({ code: '%load_ext nbagent', silent: true, store_history: false });
    const reply = await future.done;
    if (reply.content.status !== 'ok') {
      throw new Error('%load_ext nbagent failed in the kernel: is nbagent installed in its environment?');
    }
    this.reconnect();
  }

  async start(prompt: string, kind: StartKind, cell: Cell | null, model: string, fresh: boolean): Promise<RunSummary> {
    const fields: Fields<'start'> = { prompt, kind, cell: cell ? cellPayload(cell) : null, new: fresh };
    if (model.trim()) {
      fields.model = model.trim();
    }
    fresh = fresh || (this.fresh && kind !== 'fix' && kind !== 'explain'); // a side thread leaves it pending
    fields.new = fresh;
    if (!fresh && this.picked && typeof this.picked.id === 'string') {
      fields.resume = this.picked.id; // the conversation picked from the list (a no-op once it continues it)
    } else if (!fresh && this.runs.size === 0 && !this.sessionId && this.stored && typeof this.stored.id === 'string') {
      fields.resume = this.stored.id; // the notebook's latest stored conversation, shown when none ran here
    }
    if (kind === 'prompt' || kind === 'plan') {
      const cells = mentionedCells(this.notebook.content, prompt);
      if (cells.length) {
        fields.cells = cells as Fields<'start'>['cells']; // at most 12 (the schema's maxItems)
      }
    }
    const run = await this.request('start', fields);
    if (kind !== 'fix' && kind !== 'explain') {
      this.fresh = false;
    }
    this.runs.set(run.id, run);
    this.emit();
    return run;
  }

  /** This notebook's stored conversations, newest first. */
  conversations(): Promise<Results['conversations']> {
    return this.request('conversations', {});
  }

  /** Show a stored conversation (picked from the list): the next prompt continues it. */
  async open(session: string): Promise<void> {
    const opened = await this.request('open', { session });
    this.picked = opened;
    this.fresh = false;
    this.hideShown();
    this.emit();
  }

  /** "New chat": what is shown is put aside, and the next prompt starts a conversation. */
  newChat(): void {
    this.picked = null;
    this.fresh = true;
    this.hideShown();
    this.emit();
  }

  private hideShown(): void {
    for (const id of this.runs.keys()) {
      this.hidden.add(id);
    }
  }

  /** The runs the panel shows: those of the conversation in front of the person. */
  shownRuns(): ShownRun[] {
    return [...this.runs.values()].filter(r => !this.hidden.has(r.id));
  }

  /** Decide the call `call` of `run`, bound to `digest`: the digest of the exact arguments the person saw. */
  decide(run: string, call: { call: string; digest: string }, choice: Choice, reason = ''): Promise<Results['decide']> {
    return this.request('decide', { run, call: call.call, digest: call.digest, choice, reason });
  }

  stop(run: string): Promise<Results['stop']> {
    return this.request('stop', { run });
  }

  undone(run: string, call: string): Promise<Results['undone']> {
    return this.request('undone', { run, call });
  }

  /** Ask the kernel to propose a finished run's cells (what `%agent --to-cells` does); the run that proposes
   * them is shown from now on. */
  async toCells(run: string): Promise<Results['to_cells']> {
    const result = await this.request('to_cells', { run });
    if (result.run) {
      this.runs.set(result.run.id, result.run);
      this.emit();
    }
    return result;
  }
}

/** What the kernel is told of a cell for "Fix", "Explain" and "Ask": its id, source and error outputs. */
export function cellPayload(cell: Cell): CellPayload {
  const outputs: CellPayloadOutput[] = [];
  if (cell instanceof CodeCell) {
    const models = cell.model.outputs;
    for (let i = 0; i < models.length && outputs.length < 20; i++) {
      const out = models.get(i).toJSON();
      if (out.output_type === 'error') {
        const tb = Array.isArray(out.traceback) ? out.traceback.slice(-40) : [];
        outputs.push({ output_type: 'error', ename: String(out.ename ?? ''), evalue: String(out.evalue ?? ''),
          traceback: tb.map(x => String(x).slice(0, 4000)) });
      } else if (out.output_type === 'stream') {
        const text = Array.isArray(out.text) ? out.text.join('') : String(out.text ?? '');
        outputs.push({ output_type: 'stream', name: String(out.name ?? ''), text: text.slice(-2000) });
      }
    }
  }
  const index = notebookOf(cell)?.widgets.indexOf(cell) ?? -1;
  const type = cell.model.type;
  return {
    id: cell.model.id,
    source: cell.model.sharedModel.getSource(),
    outputs,
    execution_count: cell instanceof CodeCell ? (cell.model.executionCount ?? null) : null,
    ...(index >= 0 ? { index } : {}),
    cell_type: type === 'markdown' || type === 'raw' ? type : 'code'
  };
}

/** The cells a prompt mentions as `@[n]`: each the code cell shown as In [n] (at most 12; sources only). */
export function mentionedCells(notebook: Notebook, prompt: string): CellPayload[] {
  const numbers: number[] = [];
  const mention = /(?<![\w@])@\[(\d{1,6})\]/g;
  for (let m = mention.exec(prompt); m !== null && numbers.length < 12; m = mention.exec(prompt)) {
    if (!numbers.includes(Number(m[1]))) {
      numbers.push(Number(m[1]));
    }
  }
  const out: CellPayload[] = [];
  for (const n of numbers) {
    const cell = notebook.widgets.find(w => w instanceof CodeCell && w.model.executionCount === n);
    if (cell) {
      out.push({ ...cellPayload(cell), outputs: [] });
    }
  }
  return out;
}

function notebookOf(cell: Cell): Notebook | null {
  const parent = cell.parent;
  return parent instanceof Notebook ? parent : null;
}

/** A cell as the person sees it: `[8] by_region = ...` (its In [n] and first line), `cell 5 ...` never run. */
export function shownName(cell: Cell, index: number): string {
  return cellName({
    number: index + 1,
    cell_type: cell.model.type,
    source: cell.model.sharedModel.getSource(),
    execution_count: cell instanceof CodeCell ? (cell.model.executionCount ?? null) : null
  });
}

/** The cell of `nb` with this id, named as the person sees it; `fallback` when it is not in the notebook. */
export function nameOf(nb: NotebookPanel, cellId: string, fallback: string): string {
  const widgets = nb.content.widgets;
  const index = widgets.findIndex(w => w.model.id === cellId);
  return index >= 0 ? shownName(widgets[index], index) : fallback;
}

export function hasError(cell: Cell): boolean {
  if (!(cell instanceof CodeCell)) {
    return false;
  }
  const outputs = cell.model.outputs;
  for (let i = 0; i < outputs.length; i++) {
    if (outputs.get(i).type === 'error') {
      return true;
    }
  }
  return false;
}
