/**
 * Decisions that cannot be lost: Approve, Deny, Always allow and Stop in a run's live view (in a cell or in the
 * panel) reach the kernel through the notebook's own `nbagent.panel` comm (./hub.ts), not through the buttons'
 * widget comms. The widgets only draw. Another page on the kernel may have closed those widgets (Notebook 7's
 * file-browser tab answers every widget's `comm_open` with `comm_close`): the kernel then forgets them and drops
 * their clicks, while this comm, which this page opened, still answers.
 *
 * A click is taken here only on a button the widget manager drew inside a live view (`.nba-view`): a
 * `.jupyter-button` in the view's question box (`.nba-ask`) or its header (`.nba-head`). What it decides is
 * read from what the kernel drew with it: the question's `data-nba-run`, `data-nba-call` and `data-nba-digest`
 * (the digest of the call and the exact arguments shown; nbagent/jupyter/live/approval_panel.py), the view's
 * `nba-run-<id>` class for Stop. The kernel takes the decision only for that call while it waits, and only with
 * that digest (SECURITY.md invariant 4), once, whichever path comes first. Where this page has no hub ready
 * (nbagent not loaded yet, no kernel), the click goes on to the widget, as before.
 */
import { PanelHub } from './hub';
import type { Choice } from './protocol';

type Action = Choice | 'stop';

const ACTIONS: [string, Action][] = [
  ['nba-approve', 'approve'],
  ['nba-deny', 'deny'],
  ['nba-always', 'always'],
  ['nba-stop', 'stop']
];

/** What a click asks the kernel, read from the view the button is in; null: not a live view's decision. */
export type Decision =
  | { action: Choice; run: string; call: string; digest: string; reason: string; ask: HTMLElement }
  | { action: 'stop'; run: string; head: HTMLElement };

function actionOf(button: Element): Action | null {
  for (const [cls, action] of ACTIONS) {
    if (button.classList.contains(cls)) {
      return action;
    }
  }
  return null;
}

/** The run a view shows, from its `nba-run-<id>` class. */
export function runOf(view: Element): string | null {
  for (const cls of Array.from(view.classList)) {
    if (cls.startsWith('nba-run-') && /^nba-run-[A-Za-z0-9_-]{1,64}$/.test(cls)) {
      return cls.slice('nba-run-'.length);
    }
  }
  return null;
}

/** The decision a click on `target` asks for, if it is on a live view's button (see the module's docstring). */
export function decisionOf(target: EventTarget | null): Decision | null {
  const button = (target as Element | null)?.closest?.('button.jupyter-button');
  const view = button?.closest('.nba-view');
  if (!button || !view) {
    return null;
  }
  const action = actionOf(button);
  if (action === 'stop') {
    const head = button.closest('.nba-head');
    const run = runOf(view);
    return head && head.closest('.nba-view') === view && run ? { action, run, head: head as HTMLElement } : null;
  }
  const ask = button.closest('.nba-ask');
  if (!action || !ask || ask.closest('.nba-view') !== view) {
    return null;
  }
  // the question is the box's own HTML part (a direct child), not something drawn further down
  const part = Array.from(ask.children).find(child => child.classList.contains('widget-html'));
  const question = part?.querySelector('.nba-ask-q[data-nba-digest]') as HTMLElement | null | undefined;
  const [run, call, digest] = ['run', 'call', 'digest'].map(name => question?.getAttribute(`data-nba-${name}`));
  if (!run || !call || !digest || run !== runOf(view)) {
    return null;
  }
  const reason = ask.querySelector('.widget-text input') as HTMLInputElement | null;
  return { action, run, call, digest, reason: action === 'deny' ? (reason?.value ?? '') : '', ask: ask as HTMLElement };
}

function note(host: HTMLElement, text: string): void {
  let shown = Array.from(host.children).find(child => child.classList.contains('nba-ask-note')) as HTMLElement | undefined;
  if (!text) {
    shown?.remove();
    return;
  }
  if (!shown) {
    shown = document.createElement('div');
    shown.className = 'nba-ask-note';
    host.append(shown);
  }
  shown.textContent = text;
}

function setBusy(host: HTMLElement, busy: boolean): void {
  host.querySelectorAll('button.jupyter-button').forEach(b => {
    (b as HTMLButtonElement).disabled = busy;
  });
}

/** Send a decision through `hub`; say on the view what came of it when it was not taken. */
export async function send(hub: PanelHub, decision: Decision): Promise<void> {
  const host = decision.action === 'stop' ? decision.head : decision.ask;
  setBusy(host, true);
  note(host, '');
  try {
    if (decision.action === 'stop') {
      await hub.stop(decision.run);
      return;
    }
    const result = await hub.decide(decision.run, decision, decision.action, decision.reason);
    if (!result.taken) {
      note(host, result.why ?? 'This call was decided already.');
    }
  } catch (err) {
    note(host, err instanceof Error ? err.message : String(err));
    setBusy(host, false);
  }
}

/**
 * Take the clicks on live views' buttons anywhere in the page (capture phase: before the widget's own handler),
 * and send each through the hub of the notebook the view belongs to (`hubFor`; null: leave it to the widget).
 * Returns a function that stops.
 */
export function routeDecisions(hubFor: (view: Element) => PanelHub | null): () => void {
  const onClick = (event: MouseEvent) => {
    const decision = decisionOf(event.target);
    if (!decision) {
      return;
    }
    const view = (decision.action === 'stop' ? decision.head : decision.ask).closest('.nba-view')!;
    const hub = hubFor(view);
    if (!hub || hub.state !== 'ready') {
      return; // no comm to the kernel here yet: the widget's own message is all there is
    }
    event.stopPropagation();
    event.preventDefault();
    void send(hub, decision);
  };
  document.addEventListener('click', onClick, true);
  return () => document.removeEventListener('click', onClick, true);
}
