/**
 * A run's live view outlives its kernel: what takes its place.
 *
 * While a run goes on, the kernel sends its static rendering as it would read if the kernel stopped now
 * (`snapshot` requests, see nbagent/jupyter/notebook/snapshots.py). It is kept in the metadata of the cell that shows
 * the run (`nbagent_live`, by widget model id), which redraws nothing. When the kernel restarts, dies or is
 * switched, or when a widget of a reopened notebook has no model any more ("Error displaying widget: model
 * not found"), the widget's output is replaced by the kept rendering, so the saved notebook holds the run as
 * far as it went. A run that ends normally has its display replaced by the kernel; the kept copy is dropped.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import { NotebookPanel } from '@jupyterlab/notebook';

const WIDGET = 'application/vnd.jupyter.widget-view+json';
const KEY = 'nbagent_live';
const DEAD = 'Error displaying widget: model not found';

type Kept = { [modelId: string]: { html: string; text: string } };

function widgetIdOf(output: nbformat.IOutput): string | null {
  const data = output.data;
  const view = data && typeof data === 'object' && !Array.isArray(data) ? (data as nbformat.IMimeBundle)[WIDGET] : null;
  const id = view && typeof view === 'object' && !Array.isArray(view) ? (view as { model_id?: unknown }).model_id : null;
  return typeof id === 'string' && id ? id : null;
}

function codeCells(panel: NotebookPanel): CodeCell[] {
  return panel.content.widgets.filter((c: Cell) => c instanceof CodeCell) as CodeCell[];
}

function widgetIds(cell: CodeCell): string[] {
  const ids: string[] = [];
  const outputs = cell.model.outputs;
  for (let i = 0; i < outputs.length; i++) {
    const id = widgetIdOf(outputs.get(i).toJSON());
    if (id) {
      ids.push(id);
    }
  }
  return ids;
}

/** The kept renderings of a cell, without those whose widget is no longer among its outputs. */
function keptOf(cell: CodeCell): Kept {
  const kept = { ...((cell.model.getMetadata(KEY) as Kept | undefined) ?? {}) };
  const present = new Set(widgetIds(cell));
  for (const id of Object.keys(kept)) {
    if (!present.has(id)) {
      delete kept[id];
    }
  }
  return kept;
}

function store(cell: CodeCell, kept: Kept): void {
  if (Object.keys(kept).length) {
    cell.model.setMetadata(KEY, kept);
  } else if (cell.model.getMetadata(KEY) !== undefined) {
    cell.model.deleteMetadata(KEY);
  }
}

/** Keep (or, with html null, drop) the rendering of the run whose widget is `modelId`. */
export function keepRendering(panel: NotebookPanel, modelId: string, html: string | null, text: string | null): boolean {
  for (const cell of codeCells(panel)) {
    const known = (cell.model.getMetadata(KEY) as Kept | undefined) ?? {};
    if (!widgetIds(cell).includes(modelId) && !(modelId in known)) {
      continue;
    }
    const kept = keptOf(cell);
    if (html === null) {
      delete kept[modelId];
    } else if (widgetIds(cell).includes(modelId)) {
      kept[modelId] = { html, text: text ?? '' };
    }
    store(cell, kept);
    return true;
  }
  return html === null;
}

/** Put the kept rendering in place of each widget output of `cell` that has one (only output `index`, if given). */
export function replaceDead(cell: CodeCell, index?: number): number {
  const kept = keptOf(cell);
  const outputs = cell.model.outputs;
  let replaced = 0;
  for (let i = 0; i < outputs.length; i++) {
    if (index !== undefined && i !== index) {
      continue;
    }
    const id = widgetIdOf(outputs.get(i).toJSON());
    const rendering = id ? kept[id] : undefined;
    if (id && rendering) {
      const shown: nbformat.IDisplayData = {
        output_type: 'display_data',
        data: { 'text/html': rendering.html, 'text/plain': rendering.text },
        metadata: {}
      };
      outputs.set(i, shown);
      delete kept[id];
      replaced++;
    }
  }
  store(cell, kept);
  return replaced;
}

/** Every live view of the notebook: its kernel is gone (restarted, dead, switched). */
export function replaceAll(panel: NotebookPanel): number {
  let n = 0;
  for (const cell of codeCells(panel)) {
    n += replaceDead(cell);
  }
  return n;
}

/** Replace the widgets that say their model is gone (a notebook reopened after its kernel went). */
function replaceMissing(panel: NotebookPanel): void {
  const dead = Array.from(panel.content.node.querySelectorAll('.jupyter-widgets')).filter(
    e => e.textContent?.trim() === DEAD
  );
  for (const node of dead) {
    for (const cell of codeCells(panel)) {
      const index = cell.outputArea.widgets.findIndex(w => w.node.contains(node));
      if (index >= 0) {
        replaceDead(cell, index);
        break;
      }
    }
  }
}

/** Follow a notebook panel: its kernel's restarts and its widgets without a model. */
export function followRuns(panel: NotebookPanel): void {
  const session = panel.sessionContext;
  session.statusChanged.connect((_s, status) => {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      replaceAll(panel);
    }
  });
  session.kernelChanged.connect((_s, change) => {
    if (change.oldValue) {
      replaceAll(panel);
    }
  });
  let scheduled = false;
  const observer = new MutationObserver(() => {
    if (scheduled) {
      return;
    }
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      if (!panel.isDisposed) {
        replaceMissing(panel);
      }
    }, 0);
  });
  observer.observe(panel.content.node, { childList: true, subtree: true, characterData: true });
  panel.disposed.connect(() => observer.disconnect());
}
