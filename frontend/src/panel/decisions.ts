/**
 * Decisions that cannot be lost: what a person decides or sends in nbagent's live widgets reaches the kernel
 * through the notebook's own `nbagent.panel` comm (./panelComm.ts), not through the widgets' comms. The widgets only
 * draw. Another page on the kernel may have closed those widgets (Notebook 7's file-browser tab answers every
 * widget's `comm_open` with `comm_close`): the kernel then forgets them and drops their clicks, while this comm,
 * which this page opened, still answers. Taken here:
 *
 *   a run's live view (`.nba-view`)        Approve, Deny, Always allow in a call's question (`.nba-ask`), Stop in
 *                                          its header (`.nba-head`), Send (or Enter) in its steering box (`.nba-steer`)
 *   a batch's view (`.nba-batch-view`)     Approve, Deny, Approve all in an item's question (`.nba-ask`)
 *   an MCP trust prompt (`.nba-consent-view`)  Trust these servers, Not now
 *
 * A click is taken only on a button the widget manager drew (`button.jupyter-button`) in such a widget, and what
 * it decides is read from what the kernel drew with it: a question's `data-nba-run` (or `data-nba-batch`),
 * `data-nba-call` and `data-nba-digest` (the digest of the call and the exact arguments shown;
 * nbagent/jupyter/live/approval_panel.py, batch_view.py), the trust prompt's `data-nba-consent` (the digest of the
 * configuration shown; nbagent/jupyter/session/consent.py), the view's `nba-run-<id>` / `nba-batch-id-<id>` class
 * for Stop and Send. The kernel takes a decision only for that call while it waits, and only with that digest
 * (SECURITY.md invariant 4), once, whichever path comes first. Where this page has no hub ready (nbagent not
 * loaded yet, no kernel), the click goes on to the widget, as before.
 */
import { showText } from '../shown';
import { PanelHub } from './panelComm';
import type { Choice } from './protocol';

const ACTIONS: [string, Choice | 'stop'][] = [
  ['nba-approve', 'approve'],
  ['nba-deny', 'deny'],
  ['nba-always', 'always'],
  ['nba-stop', 'stop']
];

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** What a click (or Enter) asks the kernel, read from the widget it is in; null: not one of nbagent's. */
export type Decision =
  | { action: Choice; run: string; call: string; digest: string; reason: string; ask: HTMLElement }
  | { action: Choice; batch: string; call: string; digest: string; reason: string; ask: HTMLElement }
  | { action: 'stop'; run: string; head: HTMLElement }
  | { action: 'trust' | 'later'; consent: string; ask: HTMLElement }
  | { action: 'send'; run: string; text: string; input: HTMLInputElement; ask: HTMLElement };

function actionOf(button: Element): Choice | 'stop' | null {
  for (const [cls, action] of ACTIONS) {
    if (button.classList.contains(cls)) {
      return action;
    }
  }
  return null;
}

function idOf(view: Element, prefix: string): string | null {
  for (const cls of Array.from(view.classList)) {
    if (cls.startsWith(prefix) && ID.test(cls.slice(prefix.length))) {
      return cls.slice(prefix.length);
    }
  }
  return null;
}

/** The run a view shows, from its `nba-run-<id>` class. */
export function runOf(view: Element): string | null {
  return idOf(view, 'nba-run-');
}

/** The batch a batch view shows, from its `nba-batch-id-<id>` class. */
export function batchOf(view: Element): string | null {
  return idOf(view, 'nba-batch-id-');
}

/** The question a box asks: its own HTML part (a direct child), never something drawn further down. */
function questionOf(box: Element, selector: string): HTMLElement | null {
  const part = Array.from(box.children).find(child => child.classList.contains('widget-html'));
  return (part?.querySelector(selector) as HTMLElement | null | undefined) ?? null;
}

function reasonOf(ask: Element, action: string): string {
  const reason = ask.querySelector('.widget-text input') as HTMLInputElement | null;
  return action === 'deny' ? (reason?.value ?? '') : '';
}

/** The text a steering box holds, bound to its run view's run (null: not a steering box of a live view). */
function steeringOf(input: HTMLInputElement | null, view: Element): Decision | null {
  const box = input?.closest('.nba-steer');
  const run = runOf(view);
  if (!input || !box || box.closest('.nba-view') !== view || !run) {
    return null;
  }
  const text = input.value.trim();
  return text ? { action: 'send', run, text, input, ask: box as HTMLElement } : null;
}

function inRunView(button: Element, view: Element): Decision | null {
  if (button.classList.contains('nba-steer-send')) {
    const box = button.closest('.nba-steer');
    return box ? steeringOf(box.querySelector('.nba-steer-text input'), view) : null;
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
  const question = questionOf(ask, '.nba-ask-q[data-nba-digest]');
  const [run, call, digest] = ['run', 'call', 'digest'].map(name => question?.getAttribute(`data-nba-${name}`));
  if (!run || !call || !digest || run !== runOf(view)) {
    return null;
  }
  return { action, run, call, digest, reason: reasonOf(ask, action), ask: ask as HTMLElement };
}

function inBatchView(button: Element, view: Element): Decision | null {
  const action = actionOf(button);
  const ask = button.closest('.nba-ask');
  if (!action || action === 'stop' || !ask || ask.closest('.nba-batch-view') !== view) {
    return null;
  }
  const question = questionOf(ask, '.nba-ask-q[data-nba-digest]');
  const [batch, call, digest] = ['batch', 'call', 'digest'].map(name => question?.getAttribute(`data-nba-${name}`));
  if (!batch || !call || !digest || batch !== batchOf(view)) {
    return null;
  }
  return { action, batch, call, digest, reason: reasonOf(ask, action), ask: ask as HTMLElement };
}

function inConsent(button: Element, view: Element): Decision | null {
  const action = button.classList.contains('nba-trust') ? 'trust' : button.classList.contains('nba-later') ? 'later' : null;
  const consent = questionOf(view, '.nba-consent-q[data-nba-consent]')?.getAttribute('data-nba-consent');
  return action && consent ? { action, consent, ask: view as HTMLElement } : null;
}

/** The decision a click on `target` asks for, if it is on a button of one of nbagent's live widgets. */
export function decisionOf(target: EventTarget | null): Decision | null {
  const button = (target as Element | null)?.closest?.('button.jupyter-button');
  const widget = button?.closest('.nba-view, .nba-batch-view, .nba-consent-view');
  if (!button || !widget) {
    return null;
  }
  if (widget.classList.contains('nba-view')) {
    return inRunView(button, widget);
  }
  return widget.classList.contains('nba-batch-view') ? inBatchView(button, widget) : inConsent(button, widget);
}

/** The message Enter sends from a live view's steering box (`target`: the key's target). */
export function steeringEnter(target: EventTarget | null): Decision | null {
  const input = (target as Element | null)?.closest?.('.nba-steer-text input') as HTMLInputElement | null;
  const view = input?.closest('.nba-view');
  return input && view ? steeringOf(input, view) : null;
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
  showText(shown, text);  // the kernel's words may quote the model's (a call's name, a path)
}

function setBusy(host: HTMLElement, busy: boolean): void {
  host.querySelectorAll('button.jupyter-button').forEach(b => {
    (b as HTMLButtonElement).disabled = busy;
  });
}

function hostOf(decision: Decision): HTMLElement {
  return decision.action === 'stop' ? decision.head : decision.ask;
}

/** Send a decision through `hub`; say on the widget what came of it when it was not taken. */
export async function send(hub: PanelHub, decision: Decision): Promise<void> {
  const host = hostOf(decision);
  note(host, '');
  if (decision.action === 'send') {
    decision.input.value = ''; // sent: the box is empty again (its widget never held the text)
    try {
      const result = await hub.request('steer', { run: decision.run, text: decision.text });
      if (!result.sent) {
        note(host, result.note);
      }
    } catch (err) {
      decision.input.value = decision.text; // not sent: the text stays for another try
      note(host, err instanceof Error ? err.message : String(err));
    }
    return;
  }
  setBusy(host, true);
  try {
    if (decision.action === 'stop') {
      await hub.stop(decision.run);
      return;
    }
    let result: { taken: boolean; why?: string };
    if ('consent' in decision) {
      result = await hub.request('trust', { digest: decision.consent, choice: decision.action });
    } else if ('batch' in decision) {
      const { batch, call, digest, action, reason } = decision;
      result = await hub.request('batch_decide', { batch, call, digest, choice: action, reason });
    } else {
      result = await hub.decide(decision.run, decision, decision.action, decision.reason);
    }
    if (!result.taken) {
      note(host, result.why ?? 'This was decided already.');
    }
  } catch (err) {
    note(host, err instanceof Error ? err.message : String(err));
    setBusy(host, false);
  }
}

/**
 * Take the clicks on live widgets' buttons anywhere in the page, and Enter in a run view's steering box (capture
 * phase: before the widget's own handler), and send each through the hub of the notebook the widget belongs to
 * (`hubFor`; null: leave it to the widget). Returns a function that stops.
 */
export function routeDecisions(hubFor: (widget: Element) => PanelHub | null): () => void {
  const take = (event: Event, decision: Decision | null) => {
    if (!decision) {
      return;
    }
    const hub = hubFor(hostOf(decision));
    if (!hub || hub.state !== 'ready') {
      return; // no comm to the kernel here yet: the widget's own message is all there is
    }
    event.stopPropagation();
    event.preventDefault();
    void send(hub, decision);
  };
  const onClick = (event: MouseEvent) => take(event, decisionOf(event.target));
  const onKey = (event: KeyboardEvent) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      take(event, steeringEnter(event.target));
    }
  };
  document.addEventListener('click', onClick, true);
  document.addEventListener('keydown', onKey, true);
  return () => {
    document.removeEventListener('click', onClick, true);
    document.removeEventListener('keydown', onKey, true);
  };
}
