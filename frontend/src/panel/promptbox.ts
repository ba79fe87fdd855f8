/**
 * The panel's prompt box: the review of the conversation's changes above it (filled by ./changelist.ts), the
 * "About" chip of the cell the next prompt is about, the words (with @-mentions: `@name` a variable, `@data.csv`
 * a file's head, `@[3]` the cell shown as [3], resolved by the hub when it sends), the model picker, "plan first",
 * Send (Ctrl+Enter too) and the line that says what went wrong. Everything is written as text.
 */
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';

import { PanelHub, shownName } from './panelComm';
import type { ModelChoice, StartKind } from './protocol';
import { el } from './el';

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

export class PromptBox {
  readonly node = el('div', 'nba-panel-ask');
  /** The conversation's review (./changelist.ts draws it), above the box. */
  readonly review = el('div', 'nba-panel-review');
  /** The cell the next prompt is about ("Ask nbagent" on a cell), or none: the notebook. */
  about: Cell | null = null;
  private readonly aboutEl = el('div', 'nba-panel-about');
  private readonly prompt = document.createElement('textarea');
  private readonly model = document.createElement('input');
  private readonly choices = document.createElement('datalist');
  private readonly planFirst = document.createElement('input');
  private readonly send = el('button', 'nba-panel-send jp-Button', 'Send') as HTMLButtonElement;
  private readonly errorEl = el('div', 'nba-panel-error');

  /** `hub` is the current notebook's, if any; `redraw` draws the panel again. */
  constructor(private readonly hub: () => PanelHub | null, private readonly redraw: () => void) {
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
    this.node.append(this.review, this.aboutEl, this.prompt, row, this.errorEl);
    this.send.onclick = () => void this.submit();
    this.prompt.addEventListener('keydown', event => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        void this.submit();
      }
    });
  }

  focus(): void {
    this.prompt.focus();
  }

  showError(text: string): void {
    this.errorEl.textContent = text;
  }

  /** Empty what the panel draws afresh each time (the review, the About chip). */
  clear(): void {
    this.aboutEl.textContent = '';
    this.review.textContent = '';
  }

  /** Draw the box for this notebook: the model picker's choices, the About chip, Send on once the kernel is ready. */
  draw(hub: PanelHub, nb: NotebookPanel): void {
    fillChoices(this.choices, hub.config.models ?? []);
    if (this.about && !this.about.isDisposed) {
      const index = nb.content.widgets.indexOf(this.about);
      const chip = el('span', 'nba-panel-chip', `About ${index >= 0 ? shownName(this.about, index) : 'the selected cell'}`);
      const clear = el('button', 'nba-panel-chip-x', '✕');
      clear.title = 'Ask about the notebook instead';
      clear.onclick = () => {
        this.about = null;
        this.redraw();
      };
      this.aboutEl.append(chip, clear);
    }
    this.send.disabled = hub.state !== 'ready';
  }

  /** Start a run in the notebook's kernel with the model typed in the picker (if any); true once it started. */
  async run(prompt: string, kind: StartKind, cell: Cell | null): Promise<boolean> {
    const hub = this.hub();
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
      this.redraw();
    }
  }
}
