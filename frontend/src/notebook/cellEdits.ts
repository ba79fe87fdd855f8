/**
 * The pure parts of answering the kernel about cells (kernel side: nbagent/jupyter/notebook/cells.py): what
 * an output is trimmed to before it is sent, the one edit `edit_cell` makes, and the refusal of a change to a
 * cell that moved on since the agent read it. No DOM and no JupyterLab here: tested in cellEdits.test.ts.
 */
import type { Output } from './protocol';

export const TEXT_LIMIT = 20000;
export const HTML_LIMIT = 4000;
export const TRACEBACK_LINES = 12;

type Loose = { [key: string]: unknown };

function joined(value: unknown): unknown {
  return Array.isArray(value) ? value.join('') : value;
}

/**
 * An output as the kernel is told it: long text keeps both ends (marked `truncated`), images and other media
 * only say they are there (null), long HTML keeps both ends (pandas puts "N rows × M columns" last), a
 * traceback its last lines.
 */
export function trimOutput(output: Loose): Output {
  const out: Loose & Output = { ...output, output_type: String(output.output_type ?? '') };
  const text = joined(output.text);
  if (typeof text === 'string') {
    if (text.length > TEXT_LIMIT) {
      out.text = text.slice(0, TEXT_LIMIT / 2) + '\n…\n' + text.slice(-TEXT_LIMIT / 2);
      out.truncated = true;
    } else {
      out.text = text;
    }
  }
  if (output.data && typeof output.data === 'object' && !Array.isArray(output.data)) {
    const data: Loose = {};
    for (const [mime, value] of Object.entries(output.data as Loose)) {
      let v = joined(value);
      if (mime.startsWith('image/') || mime.startsWith('video/') || mime === 'application/pdf') {
        v = null; // the kernel only says "an image"
      } else if (mime === 'text/html' && typeof v === 'string' && v.length > HTML_LIMIT) {
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
  if (Array.isArray(output.traceback)) {
    out.traceback = output.traceback.slice(-TRACEBACK_LINES).map(String);
  }
  return out;
}

/**
 * What `edit_cell(old, new)` leaves of `source` (and where `old` was); or why it cannot: `old` is not there,
 * or it is there more than once.
 */
export type Replaced = { ok: true; source: string; at: number } | { ok: false; why: 'missing' | 'ambiguous' };

export function replaceOnce(source: string, old: string, replacement: string): Replaced {
  const at = old ? source.indexOf(old) : -1;
  if (at < 0) {
    return { ok: false, why: 'missing' };
  }
  if (source.indexOf(old, at + 1) >= 0) {
    return { ok: false, why: 'ambiguous' };
  }
  return { ok: true, source: source.slice(0, at) + replacement + source.slice(at + old.length), at };
}

/** The source `edit_cell(old, new)` would leave, or null if `old` does not occur exactly once. */
export function applyEdit(source: string, old: string, replacement: string): string | null {
  const done = replaceOnce(source, old, replacement);
  return done.ok ? done.source : null;
}

/** A cell in a refusal: as the person sees it (the row shows it), with the id the model uses. */
function named(cellId: string, name?: string): string {
  return name ? `${name} (cell ${cellId})` : `cell ${cellId}`;
}

/** Why an edit, a deletion or a run of a cell is refused: it holds other than what the kernel expected. */
export function staleReason(cellId: string, now: string, expected: string | null | undefined, name?: string): string | null {
  if (typeof expected !== 'string' || now === expected) {
    return null;
  }
  return (
    `${named(cellId, name)} changed since you last read it (someone edited it meanwhile); nothing was done. ` +
    'Read it again with read_notebook and base the change on what it holds now.'
  );
}

/** The refusal of an edit whose `old` text is not in the cell exactly once. */
export function editRefusal(cellId: string, why: 'missing' | 'ambiguous', name?: string): string {
  return why === 'missing'
    ? `the text to replace is not in ${named(cellId, name)} any more; nothing was done`
    : `the text to replace occurs more than once in ${named(cellId, name)}; nothing was done`;
}

/** What the page knows of a cell to name it: its place (1-based), type, source and In [n]. */
export type CellShown = { number: number; cell_type: string; source: string; execution_count: number | null };

const LINE_BREAK = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/;

/**
 * `[3] total = df.revenue.sum()`: the cell as the person sees it, its In [3] and its first line (a cell never
 * run: `cell 5 total = ...`, its place). The same naming as the call rows (cell_name in
 * nbagent/jupyter/notebook/cells.py); both pass tests/fixtures/cell_names.json.
 */
export function cellName(cell: CellShown): string {
  const first = cell.source.split(LINE_BREAK).map(line => line.trim()).find(line => line !== '') ?? '';
  const points = Array.from(first); // code points, as Python counts them
  const line = points.length <= 40 ? first : points.slice(0, 39).join('') + '…';
  let where = cell.execution_count !== null ? `[${cell.execution_count}]` : `cell ${cell.number}`;
  if (cell.cell_type !== 'code') {
    where = `${cell.cell_type} cell ${cell.number}`;
  }
  return line ? `${where} ${line}` : `${where} (empty)`;
}

/** Whether a string may serve as a notebook's id (kept in its metadata, `nbagent.id`). */
export function isNotebookId(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z0-9_-]{8,64}$/.test(value);
}
