/**
 * The panel's run cards: one card per run shown, in the order the hub gives, each with its title (label, status,
 * where it came from, the plan step it is on), its body (the run's live view, drawn with the notebook's own widget
 * manager, or its static rendering once it ended), the cells it changed with Undo, the names its code left only
 * in the kernel with "Make cells" (./tocells.ts), and a plan-first run's plan to edit and run.
 *
 * A card is kept across redraws (its live view is not drawn again for nothing); the static rendering is HTML from
 * the kernel and goes through JupyterLab's sanitizer; everything else is written as text.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMime, MimeModel } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

import type { PanelHub, ShownRun } from './panelComm';
import { Host, runChanges } from './changelist';
import { makeCellsButton } from './tocells';
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

/** What the cards need from the panel that holds them. */
export type CardOwner = {
  /** Whether the panel shows (a hidden panel draws no live views). */
  visible(): boolean;
  host(hub: PanelHub, nb: NotebookPanel): Host;
  /** Start a run that carries out a plan as edited; true once it started. */
  follow(plan: string): Promise<boolean>;
};

/** A run's status in words (the kernel sends its enum). */
export function statusWord(status: string): string {
  const words: { [status: string]: string } = {
    running: 'running', waiting_for_approval: 'waiting for you', done: 'done', failed: 'failed', cancelled: 'stopped'
  };
  return words[status] ?? status.replace(/_/g, ' ');
}

export class RunCards {
  readonly node = el('div', 'nba-panel-runs');
  private cards = new WeakMap<PanelHub, Map<string, Card>>();
  private readonly plans = new Map<string, HTMLElement>();

  constructor(private readonly owner: CardOwner) {}

  /** Forget what is drawn (another notebook is shown). */
  clear(): void {
    this.node.textContent = '';
  }

  /** Scroll to a run's card (and flash it), e.g. from a cell's badge. */
  show(hub: PanelHub | null, runId: string): void {
    const card = hub ? this.cards.get(hub)?.get(runId) : undefined;
    if (card) {
      card.el.scrollIntoView({ block: 'nearest' });
      card.el.classList.add('nba-flash');
      window.setTimeout(() => card.el.classList.remove('nba-flash'), 1500);
    }
  }

  /** Drop the live views (each is a second view of the run's widgets): they come back when the panel shows. */
  hide(hub: PanelHub | null): void {
    const cards = hub ? this.cards.get(hub) : undefined;
    for (const card of cards?.values() ?? []) {
      if (card.shown.startsWith('w:')) {
        this.dropRenderer(card);
        card.body.textContent = '';
        card.shown = '';
      }
    }
  }

  /** Draw the hub's shown runs, a card each, in order (cards of runs no longer shown go). */
  render(hub: PanelHub, nb: NotebookPanel): void {
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
      if (this.node.children[i] !== node) {
        this.node.insertBefore(node, this.node.children[i] ?? null);
      }
    });
    while (this.node.children.length > order.length) {
      this.node.lastElementChild!.remove();
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
    if (run.widget && !this.owner.visible()) {
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
    runChanges(card.changes, run, this.owner.host(hub, nb));
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
        window.setTimeout(() => this.show(hub, result.run!.id), 100);
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
        if (await this.owner.follow(text.value)) {
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
