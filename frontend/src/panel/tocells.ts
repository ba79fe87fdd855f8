/**
 * "Make cells" on a finished run whose code left names that exist only in the kernel: on the line the run's
 * view in its cell says it on (`.nba-kernel-only`, written by nbagent/render/lineage.py with the run's id in
 * `data-run`), and in the run's card in the panel (./runcards.ts, from the summary's `kernel_only`). A click
 * asks the kernel (op `to_cells`, what `%agent --to-cells` does) to propose the run's cells below its cell:
 * each one a change reviewed as any agent edit (Accept / Reject on the cell, Undo in the panel); nothing runs.
 *
 * Reads HTML others may have written (a notebook's saved outputs can hold any markup): a line gets the button
 * only inside an nbagent view (`.nba`, `.nba-view`), outside a tool's call, result or presentation, the model's text and
 * sanitized fragments, and only with a run id of the shape nbagent makes. The kernel acts only on a run it
 * has, and every cell it proposes is still shown to be accepted or rejected.
 */
import { watchAdded } from '../added';

export const RUN_ID = /^[0-9a-f]{12}$/;
const LINE = '.nba-kernel-only';
const NOT_THE_VIEW = '.nba-call, .nba-result, .nba-presentation, .nba-safe, .nba-md';

/** The run a `.nba-kernel-only` line belongs to, when it is one nbagent's view drew; else null. */
export function runOfLine(line: Element): string | null {
  if (!line.matches(LINE) || !line.closest('.nba, .nba-view') || line.closest(NOT_THE_VIEW)) {
    return null;
  }
  const run = line.getAttribute('data-run') ?? '';
  return RUN_ID.test(run) ? run : null;
}

/** What a click says while and after the kernel answers (`ask` resolves to the words to show). */
export function makeCellsButton(run: string, ask: (run: string) => Promise<string>): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'jp-Button nba-cbtn nba-to-cells';
  b.textContent = 'Make cells';
  b.title = 'Propose, below the run\'s cell, the cells that make these names: the code as it ran, each one for you ' +
    'to accept or reject; nothing runs';
  b.setAttribute('data-lm-suppress-shortcuts', ''); // a key on the button is the button's, not the notebook's
  b.addEventListener('mousedown', event => event.stopPropagation());
  b.addEventListener('click', event => {
    event.stopPropagation();
    b.disabled = true;
    b.textContent = 'Proposing…';
    ask(run).then(
      said => {
        b.textContent = said;
      },
      err => {
        b.disabled = false;
        b.textContent = 'Make cells';
        b.title = `It did not work: ${err instanceof Error ? err.message : String(err)}`;
      }
    );
  });
  return b;
}

function decorate(root: Element, ask: (run: string) => Promise<string>): void {
  const lines = root.matches(LINE) ? [root] : Array.from(root.querySelectorAll(LINE));
  for (const line of lines) {
    const run = runOfLine(line);
    if (run !== null && !Array.from(line.children).some(child => child.matches('.nba-to-cells'))) {
      line.append(' ', makeCellsButton(run, ask));
    }
  }
}

/** Give every such line under `root` its button, now and whenever one is drawn. Returns a function that stops. */
export function watchKernelOnly(root: HTMLElement, ask: (run: string) => Promise<string>): () => void {
  const stop = watchAdded(root, nodes => {
    for (const node of nodes) {
      if (node.isConnected) {
        decorate(node, ask);
      }
    }
  });
  decorate(root, ask);
  return stop;
}
