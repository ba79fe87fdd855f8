/**
 * The nbagent side panel: the current notebook's conversation, a prompt box that starts a run in its kernel,
 * each run's live view (drawn with that notebook's own widget manager, so Approve / Deny / Always allow and
 * Stop work here as in the cell), the run's static rendering once it ended, its model, mode, tools, cost and
 * context gauge, the cells it changed with Undo, and, once it ended, the names its code left only in the kernel
 * with "Make cells" (./tocells.ts).
 *
 * What reaches the page is inert: the static rendering is HTML from the kernel and goes through JupyterLab's
 * sanitizer; everything else (labels, stored messages, errors) is written as text.
 */
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMime, MimeModel } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

import { PanelHub, ShownRun, shownName } from './hub';
import type { ModelChoice, RunHead, StartKind, StoredConversation } from './protocol';
import { Host, conversationReview, runChanges } from './changelist';
import { makeCellsButton } from './tocells';
import { conversationList } from './conversations';
import { SettingsView } from './settings';
import { stepLine } from './step';
import { el } from './el';

export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

type Card = {
  el: HTMLElement;
  title: HTMLElement;
  body: HTMLElement;
  changes: HTMLElement;
  kernelOnly: HTMLElement;
  shown: string; // what the body shows: "w:<model id>", "h:<html>", "n:<note>"
  renderer: (IRenderMime.IRenderer & Widget) | null;
};

/** A run's status in words (the kernel sends its enum). */
export function statusWord(status: string): string {
  const words: { [status: string]: string } = {
    running: 'running', waiting_for_approval: 'waiting for you', done: 'done', failed: 'failed', cancelled: 'stopped'
  };
  return words[status] ?? status.replace(/_/g, ' ');
}

/** What the model was sent with the person's words (a button's instructions, the cell, its error), folded. */
export function contextFold(sent: string): HTMLElement {
  const fold = el('details', 'nba-context');
  const lines = sent.split('\n').length;
  fold.append(el('summary', '', `what nbagent was sent with it (${lines} line${lines === 1 ? '' : 's'})`),
    el('div', 'nba-pre', sent));
  return fold;
}

/** The model picker's choices (what the kernel offers: its own models, the priced models of providers with a key). */
export function fillChoices(list: HTMLDataListElement, models: readonly ModelChoice[]): void {
  const stamp = models.map(m => m.spec).join('\n');
  if (list.dataset.stamp === stamp) {
    return;
  }
  list.dataset.stamp = stamp;
  list.textContent = '';
  for (const choice of models) {
    const option = document.createElement('option');
    option.value = choice.spec;
    option.label = choice.label;
    list.append(option);
  }
}

export class AgentPanel extends Widget {
  private notebook: NotebookPanel | null = null;
  private hub: PanelHub | null = null;
  private cards = new WeakMap<PanelHub, Map<string, Card>>();
  private about: Cell | null = null;
  private readonly statusEl = el('div', 'nba-panel-status');
  private readonly convEl = el('div', 'nba-panel-conv');
  private readonly runsEl = el('div', 'nba-panel-runs');
  private readonly storedEl = el('div', 'nba-panel-stored');
  private readonly aboutEl = el('div', 'nba-panel-about');
  private readonly prompt = document.createElement('textarea');
  private readonly model = document.createElement('input');
  private readonly choices = document.createElement('datalist');
  private readonly listButton = el('button', 'jp-Button nba-panel-list', 'Conversations') as HTMLButtonElement;
  private readonly newButton = el('button', 'jp-Button nba-panel-newchat', 'New chat') as HTMLButtonElement;
  private readonly listEl = el('div', 'nba-panel-list-box');
  private readonly planFirst = document.createElement('input');
  private readonly plans = new Map<string, HTMLElement>();
  private readonly send = el('button', 'nba-panel-send jp-Button', 'Send') as HTMLButtonElement;
  private readonly errorEl = el('div', 'nba-panel-error');
  private readonly reviewEl = el('div', 'nba-panel-review');
  private readonly pathEl = el('div', 'nba-panel-path');
  private readonly settings = new SettingsView();
  private readonly settingsButton = el('button', 'jp-Button nba-panel-settings', 'Settings') as HTMLButtonElement;
  private readonly chat = el('div', 'nba-panel-chat');

  constructor(private readonly hubOf: (nb: NotebookPanel) => PanelHub) {
    super();
    this.id = 'nbagent-panel';
    this.addClass('nba-panel');
    this.title.caption = 'nbagent';
    const top = el('div', 'nba-panel-top');
    top.append(el('div', 'nba-panel-name', 'nbagent'), this.pathEl, this.settingsButton);
    this.settingsButton.title = 'Providers, API keys, the model and the %config NBAgent choices';
    this.settingsButton.onclick = () => void this.toggleSettings();
    this.settings.node.hidden = true;
    const chats = el('div', 'nba-panel-chats');
    this.listButton.title = 'This notebook\'s conversations: pick one to continue it';
    this.listButton.onclick = () => void this.toggleList();
    this.newButton.title = 'Start a new conversation (what is shown is put aside; the stored ones stay in the list)';
    this.newButton.onclick = () => {
      this.listEl.textContent = '';
      this.hub?.newChat();
      this.prompt.focus();
    };
    chats.append(this.listButton, this.newButton);
    this.prompt.className = 'nba-panel-prompt';
    this.prompt.placeholder = 'Ask nbagent to do something in this notebook; @name sends what a variable holds, @data.csv a file\'s head, @[3] the cell shown as [3] (Ctrl+Enter sends)';
    this.prompt.rows = 3;
    this.model.className = 'nba-panel-model';
    this.model.placeholder = 'model (the conversation\'s)';
    this.choices.id = `nbagent-models-${Math.random().toString(36).slice(2)}`;
    this.model.setAttribute('list', this.choices.id);
    this.planFirst.type = 'checkbox';
    this.planFirst.className = 'nba-panel-planfirst';
    const planLabel = el('label', 'nba-panel-newlabel');
    planLabel.title = 'nbagent proposes a plan and changes nothing; you edit the plan, then run it';
    planLabel.append(this.planFirst, document.createTextNode(' plan first'));
    const row = el('div', 'nba-panel-row');
    row.append(this.model, this.choices, planLabel, this.send);
    const ask = el('div', 'nba-panel-ask');
    ask.append(this.reviewEl, this.aboutEl, this.prompt, row, this.errorEl);
    this.chat.append(chats, this.listEl, this.statusEl, this.convEl, this.storedEl, this.runsEl, ask);
    this.node.append(top, this.settings.node, this.chat);
    this.send.onclick = () => void this.submit();
    this.prompt.addEventListener('keydown', event => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        void this.submit();
      }
    });
  }

  /** The notebook whose conversation the panel shows. */
  get notebookPanel(): NotebookPanel | null {
    return this.notebook;
  }

  /** Show this notebook's conversation (the current notebook changed). */
  follow(nb: NotebookPanel | null): void {
    if (nb === this.notebook) {
      return;
    }
    if (this.hub) {
      this.hub.changed.disconnect(this.render, this);
    }
    this.notebook = nb;
    this.about = null;
    this.hub = nb ? this.hubOf(nb) : null;
    if (this.hub) {
      this.hub.changed.connect(this.render, this);
    }
    this.runsEl.textContent = '';
    this.listEl.textContent = '';
    this.render();
    if (!this.settings.node.hidden) {
      void this.settings.show(this.hub);
    }
  }

  /** Show the Settings view instead of the conversation, or go back (the picker then asks for the new choices). */
  async toggleSettings(): Promise<void> {
    const opening = this.settings.node.hidden;
    this.settings.node.hidden = !opening;
    this.chat.hidden = opening;
    this.settingsButton.textContent = opening ? 'Back to the chat' : 'Settings';
    if (opening) {
      await this.settings.show(this.hub);
    } else if (this.hub && this.hub.state === 'ready') {
      await this.hub.refresh();
    }
  }

  /** Show (or hide) this notebook's conversations. */
  private async toggleList(): Promise<void> {
    const hub = this.hub;
    if (this.listEl.childElementCount) {
      this.listEl.textContent = '';
      return;
    }
    if (!hub) {
      this.showError('Open a notebook first: the panel works on the current notebook.');
      return;
    }
    this.listButton.disabled = true;
    try {
      const result = await hub.conversations();
      this.listEl.textContent = '';
      this.listEl.append(conversationList(result, hub.picked?.id ?? null, id => {
        hub.open(id).then(() => {
          this.listEl.textContent = '';
          this.prompt.focus();
        }, err => this.showError(err instanceof Error ? err.message : String(err)));
      }));
    } catch (err) {
      this.showError(err instanceof Error ? err.message : String(err));
    } finally {
      this.listButton.disabled = false;
    }
  }

  /** "Ask nbagent" on a cell: the next prompt is about it. */
  askAbout(cell: Cell): void {
    if (!this.settings.node.hidden) {
      void this.toggleSettings();
    }
    this.about = cell;
    this.render();
    this.prompt.focus();
  }

  /** Scroll to a run's card (and flash it), e.g. from a cell's badge. */
  showRun(runId: string): void {
    const card = this.hub ? this.cards.get(this.hub)?.get(runId) : undefined;
    if (card) {
      card.el.scrollIntoView({ block: 'nearest' });
      card.el.classList.add('nba-flash');
      window.setTimeout(() => card.el.classList.remove('nba-flash'), 1500);
    }
  }

  async startOn(cell: Cell, kind: 'fix' | 'explain'): Promise<void> {
    await this.run('', kind, cell);
  }

  private async submit(): Promise<void> {
    const text = this.prompt.value;
    const cell = this.about;
    if (!text.trim() && !cell) {
      this.showError('Type what nbagent should do first.');
      return;
    }
    if (await this.run(text, cell ? 'ask' : this.planFirst.checked ? 'plan' : 'prompt', cell)) {
      this.planFirst.checked = false;
      this.prompt.value = '';
      this.about = null;
      this.render();
    }
  }

  private async run(prompt: string, kind: StartKind, cell: Cell | null): Promise<boolean> {
    const hub = this.hub;
    if (!hub) {
      this.showError('Open a notebook first: the panel works on the current notebook.');
      return false;
    }
    this.showError('');
    this.send.disabled = true;
    try {
      await hub.start(prompt, kind, cell, this.model.value, false);
      return true;
    } catch (err) {
      this.showError(err instanceof Error ? err.message : String(err));
      return false;
    } finally {
      this.send.disabled = false;
    }
  }

  private host(hub: PanelHub, nb: NotebookPanel): Host {
    return { hub, nb, error: text => this.showError(text), redraw: () => this.render() };
  }

  private showError(text: string): void {
    this.errorEl.textContent = text;
  }

  protected onAfterShow(): void {
    this.render();
  }

  /** A hidden panel draws no live views (each is a second view of the run's widgets): they come back on show. */
  protected onAfterHide(): void {
    const cards = this.hub ? this.cards.get(this.hub) : undefined;
    for (const card of cards?.values() ?? []) {
      if (card.shown.startsWith('w:')) {
        this.dropRenderer(card);
        card.body.textContent = '';
        card.shown = '';
      }
    }
  }

  private render(): void {
    const hub = this.hub;
    const nb = this.notebook;
    if (!this.settings.node.hidden && !this.settings.drawn && !this.settings.asking && hub?.state === 'ready') {
      void this.settings.show(hub); // the kernel answered (or nbagent was loaded) after Settings opened
    }
    this.pathEl.textContent = nb ? nb.context.path : 'no notebook open';
    this.statusEl.textContent = '';
    this.convEl.textContent = '';
    this.storedEl.textContent = '';
    this.aboutEl.textContent = '';
    this.reviewEl.textContent = '';
    if (!hub || !nb) {
      this.statusEl.append(el('div', 'nba-panel-note', 'Open a notebook: the panel shows its conversation with nbagent.'));
      return;
    }
    const shown = hub.shownRuns();
    const storedShown = !hub.fresh && !hub.picked && !!hub.stored && !shown.some(r => !r.before_restart);
    if (hub.restarted) {
      this.statusEl.append(el('div', 'nba-panel-restarted', storedShown && hub.runs.size === 0
        ? 'The kernel restarted: its variables and the runs that were going are gone. Below is the stored ' +
          'conversation; the next prompt continues it.'
        : 'The kernel restarted: its variables and the runs that were going are gone. What the panel showed ' +
          'is kept below.'));
    }
    if (hub.state === 'connecting') {
      this.statusEl.append(el('div', 'nba-panel-note', 'Connecting to the kernel…'));
    } else if (hub.state !== 'ready') {
      const note = el('div', 'nba-panel-absent', hub.absentText());
      this.statusEl.append(note);
      if (hub.state === 'absent') {
        const load = el('button', 'jp-Button nba-panel-load', 'Load nbagent') as HTMLButtonElement;
        load.onclick = () => {
          load.disabled = true;
          hub.loadExtension().catch(err => this.showError(err instanceof Error ? err.message : String(err)));
        };
        this.statusEl.append(load);
      }
    }
    this.renderConversation(hub);
    this.renderRuns(hub, nb);
    conversationReview(this.reviewEl, shown, this.host(hub, nb));
    if (hub.picked) {
      this.renderStored(hub.picked, 'picked');
    } else if (storedShown) {
      this.renderStored(hub.stored!, 'latest');
    } else if (hub.fresh && !shown.length) {
      this.storedEl.append(el('div', 'nba-panel-note nba-panel-fresh', 'New chat: your next prompt starts a new conversation.'));
    }
    if (this.about && !this.about.isDisposed) {
      const index = nb.content.widgets.indexOf(this.about);
      const chip = el('span', 'nba-panel-chip', `About ${index >= 0 ? shownName(this.about, index) : 'the selected cell'}`);
      const clear = el('button', 'nba-panel-chip-x', '✕');
      clear.title = 'Ask about the notebook instead';
      clear.onclick = () => {
        this.about = null;
        this.render();
      };
      this.aboutEl.append(chip, clear);
    }
    this.send.disabled = hub.state !== 'ready';
  }

  private renderConversation(hub: PanelHub): void {
    const runs = hub.shownRuns();
    const last = runs.length ? runs[runs.length - 1] : null;
    const head: Partial<RunHead> = last?.head ?? {};
    fillChoices(this.choices, hub.config.models ?? []);
    const model = head.model ?? hub.config.model ?? 'no model set';
    const mode = head.mode ?? hub.config.mode ?? '';
    const chips: [string, string, string][] = [
      ['nba-panel-m', `model: ${model}`, 'the model of the conversation (type another below to change it)'],
      ['nba-panel-mode', `mode: ${mode}`, '%config NBAgent.mode sets it']
    ];
    if (head.tools) {
      chips.push(['nba-panel-tools', String(head.tools), String(head.tools_title ?? '')]);
    }
    if (head.cost) {
      chips.push(['nba-panel-cost', String(head.cost), String(head.cost_title ?? '')]);
    }
    for (const [cls, text, title] of chips) {
      const chip = el('span', `nba-chip ${cls}`, text);
      chip.title = title;
      this.convEl.append(chip);
    }
    if (head.context) {
      const gauge = el('span', 'nba-gauge nba-panel-gauge');
      gauge.title = String(head.context_title ?? '');
      if (typeof head.fraction === 'number') {
        const bar = el('span', 'nba-gauge-bar');
        const fill = el('span', 'nba-gauge-fill');
        fill.style.width = `${Math.max(0, Math.min(1, head.fraction)) * 100}%`;
        bar.append(fill);
        gauge.append(bar);
      }
      gauge.append(document.createTextNode(String(head.context)));
      this.convEl.append(gauge);
    }
  }

  private renderStored(stored: StoredConversation, how: 'picked' | 'latest'): void {
    const runs = `${stored.runs} run${stored.runs === 1 ? '' : 's'}`;
    const title = stored.error
      ? String(stored.error)
      : how === 'picked'
        ? `The conversation that began "${(stored.messages ?? []).find(m => m.role === 'you')?.text ?? stored.id}" ` +
          `(${runs}), picked from the list: your next prompt continues it.`
        : `Stored conversation ${stored.id} (${runs}): the next prompt continues it (as %agent --resume).`;
    this.storedEl.append(el('div', 'nba-panel-stored-title', title));
    for (const m of stored.messages ?? []) {
      const item = el('div', `nba-panel-msg nba-panel-msg-${m.role === 'you' ? 'you' : 'agent'}`);
      const text = el('span', 'nba-panel-text', m.text);
      if (typeof m.context === 'string') {
        text.append(contextFold(m.context));
      }
      item.append(el('span', 'nba-panel-role', m.role === 'you' ? 'YOU' : 'nbagent'), text);
      this.storedEl.append(item);
    }
  }

  private renderRuns(hub: PanelHub, nb: NotebookPanel): void {
    let cards = this.cards.get(hub);
    if (!cards) {
      cards = new Map();
      this.cards.set(hub, cards);
    }
    const order: HTMLElement[] = [];
    for (const run of hub.shownRuns()) {
      let card = cards.get(run.id);
      if (!card) {
        const cardEl = el('div', 'nba-panel-run');
        cardEl.dataset.run = run.id;
        const title = el('div', 'nba-panel-run-title');
        const body = el('div', 'nba-panel-run-body');
        const changes = el('div', 'nba-panel-changes');
        const kernelOnly = el('div', 'nba-panel-kernel-only');
        cardEl.append(title, body, kernelOnly, changes);
        card = { el: cardEl, title, body, changes, kernelOnly, shown: '', renderer: null };
        cards.set(run.id, card);
      }
      this.updateCard(card, run, hub, nb);
      order.push(card.el);
    }
    order.forEach((node, i) => {
      if (this.runsEl.children[i] !== node) {
        this.runsEl.insertBefore(node, this.runsEl.children[i] ?? null);
      }
    });
    while (this.runsEl.children.length > order.length) {
      this.runsEl.lastElementChild!.remove();
    }
  }

  private updateCard(card: Card, run: ShownRun, hub: PanelHub, nb: NotebookPanel): void {
    card.el.dataset.status = run.status;
    card.title.textContent = '';
    let from = run.source === 'panel' ? 'from the panel' : 'from a cell';
    if (run.kind === 'fix' || run.kind === 'explain') {
      from += ' · a side thread'; // Fix and Explain do not grow the conversation the box continues
    }
    card.title.append(el('span', 'nba-panel-run-label', run.label),
      el('span', 'nba-panel-run-meta', ` · ${statusWord(run.status)} · ${from}`));
    if (run.step) {
      const step = el('div', 'nba-panel-step', stepLine(run.step));
      step.title = 'The step nbagent says it is on, of the plan you approved';
      card.title.append(step);
    }
    let want: string;
    if (run.widget && !this.isVisible) {
      want = 'n:hidden';
    } else if (run.widget) {
      want = `w:${run.widget}`;
    } else if (run.html) {
      want = `h:${run.html}`;
    } else {
      want = run.before_restart ? 'n:restart' : 'n:wait';
    }
    if (card.shown !== want) {
      this.dropRenderer(card);
      card.body.textContent = '';
      card.shown = want;
      if (want.startsWith('w:')) {
        this.renderWidget(card, run.widget!, nb);
      } else if (run.html) {
        const holder = el('div', 'nba-panel-static');
        // HTML from the kernel: through JupyterLab's sanitizer (no script, no handlers, no remote loads)
        holder.innerHTML = nb.content.rendermime.sanitizer.sanitize(run.html);
        card.body.append(holder);
      } else {
        card.body.append(el('div', 'nba-panel-note', run.before_restart
          ? 'This run was going when the kernel restarted; it was stopped. Its record is in the stored conversation.'
          : run.widget ? 'Going on (its live view shows while the panel is open).' : 'Starting…'));
      }
    }
    runChanges(card.changes, run, this.host(hub, nb));
    this.renderKernelOnly(card, run, hub);
    this.renderPlan(card, run);
  }

  /** A finished run's names that exist only in the kernel, with "Make cells" (./tocells.ts). */
  private renderKernelOnly(card: Card, run: ShownRun, hub: PanelHub): void {
    const names = run.status === 'running' || run.before_restart ? [] : (run.kernel_only ?? []);
    const key = names.join(',');
    if (card.kernelOnly.dataset.names === key) {
      return; // drawn already: keep its button as it is (it may be saying what it did)
    }
    card.kernelOnly.dataset.names = key;
    card.kernelOnly.textContent = '';
    if (!names.length) {
      return;
    }
    const shown = names.length > 8 ? `${names.slice(0, 8).join(', ')} and ${names.length - 8} more` : names.join(', ');
    card.kernelOnly.append(el('span', 'nba-panel-kernel-only-text',
      `${names.length} name${names.length === 1 ? ' exists' : 's exist'} only in the kernel: ${shown} `),
    makeCellsButton(run.id, id => hub.toCells(id).then(result => {
      if (result.run) {
        window.setTimeout(() => this.showRun(result.run!.id), 100);
        return 'Proposed below the run\'s cell: review each';
      }
      return result.summary.split('\n')[0] || 'No cell is needed';
    })));
  }

  /** A plan-first run's plan, to edit and run (kept across updates: what the person typed stays). */
  private renderPlan(card: Card, run: ShownRun): void {
    if (typeof run.plan !== 'string') {
      return;
    }
    let box = this.plans.get(run.id);
    if (!box) {
      box = el('div', 'nba-panel-plan');
      const text = document.createElement('textarea');
      text.className = 'nba-panel-plan-text';
      text.value = run.plan;
      text.rows = Math.min(14, run.plan.split('\n').length + 1);
      const go = el('button', 'jp-Button nba-panel-plan-run', 'Run this plan') as HTMLButtonElement;
      go.title = 'Carry out the plan as it stands here, step by step (nothing was changed yet)';
      go.onclick = async () => {
        go.disabled = true;
        if (await this.run(text.value, 'follow', null)) {
          go.textContent = 'Plan started';
          text.readOnly = true;
        } else {
          go.disabled = false;
        }
      };
      box.append(el('div', 'nba-panel-changes-title', 'The plan: edit it, then run it'), text, go);
      this.plans.set(run.id, box);
    }
    card.changes.append(box);
  }

  private renderWidget(card: Card, modelId: string, nb: NotebookPanel): void {
    const rendermime = nb.content.rendermime;
    if (!rendermime.mimeTypes.includes(WIDGET_MIME)) {
      card.body.append(el('div', 'nba-panel-absent',
        'This notebook has no widget manager, so the live view cannot be drawn here (install ipywidgets in the ' +
        'kernel and jupyterlab_widgets in the server, then reload the page). Approve or deny in the cell instead.'));
      return;
    }
    const renderer = rendermime.createRenderer(WIDGET_MIME) as IRenderMime.IRenderer & Widget;
    card.renderer = renderer;
    const model = new MimeModel({ data: { [WIDGET_MIME]: { model_id: modelId, version_major: 2, version_minor: 1 } } });
    const host = el('div', 'nba-panel-live');
    card.body.append(host);
    const attach = (tries: number): void => {
      if (card.renderer !== renderer) {
        return;
      }
      renderer.renderModel(model).then(() => {
        if (card.renderer === renderer && !renderer.isAttached && host.isConnected) {
          Widget.attach(renderer, host);
        } else if (card.renderer === renderer && !renderer.isAttached) {
          window.setTimeout(() => attach(0), 200);
        }
      }, () => {
        // the widget's model may not have reached this page yet: ask again shortly
        if (tries > 0) {
          window.setTimeout(() => attach(tries - 1), 250);
        } else if (card.renderer === renderer) {
          host.textContent = 'The live view is not available on this page (its widgets are gone); it shows here when the run ends.';
        }
      });
    };
    attach(20);
  }

  private dropRenderer(card: Card): void {
    if (card.renderer) {
      const r = card.renderer;
      card.renderer = null;
      if (r.isAttached) {
        Widget.detach(r);
      }
      r.dispose();
    }
  }
}
