/**
 * The chips above the panel's conversation: its model, mode, tools and cost, and the context gauge, taken from the
 * last run shown (else from the kernel's configuration). Written as text; the titles say where each comes from.
 */
import type { PanelHub } from './panelComm';
import type { RunHead } from './protocol';
import { el } from './el';

/** Fill `into` (emptied by the caller) with the conversation's chips. */
export function conversationChips(into: HTMLElement, hub: PanelHub): void {
  const runs = hub.shownRuns();
  const last = runs.length ? runs[runs.length - 1] : null;
  const head: Partial<RunHead> = last?.head ?? {};
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
    into.append(chip);
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
    into.append(gauge);
  }
}
