/**
 * A line diff for the review of a proposed edit on its cell (longest common subsequence of lines).
 * Cells are small; past LIMIT lines on either side it shows the whole old text removed and the new added.
 */
import { visible, WARNING } from '../shown';

export type DiffLine = { kind: ' ' | '-' | '+'; text: string };

const LIMIT = 1500;

export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before === '' ? [] : before.split('\n');
  const b = after === '' ? [] : after.split('\n');
  if (a.length > LIMIT || b.length > LIMIT) {
    return [...a.map(t => ({ kind: '-' as const, text: t })), ...b.map(t => ({ kind: '+' as const, text: t }))];
  }
  const n = a.length;
  const m = b.length;
  // lengths[i][j]: the LCS of a[i:] and b[j:]
  const lengths: Uint32Array[] = [];
  for (let i = 0; i <= n; i++) {
    lengths.push(new Uint32Array(m + 1));
  }
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i][j] = a[i] === b[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ kind: ' ', text: a[i] });
      i++;
      j++;
    } else if (lengths[i + 1][j] >= lengths[i][j + 1]) {
      out.push({ kind: '-', text: a[i++] });
    } else {
      out.push({ kind: '+', text: b[j++] });
    }
  }
  while (i < n) {
    out.push({ kind: '-', text: a[i++] });
  }
  while (j < m) {
    out.push({ kind: '+', text: b[j++] });
  }
  return out;
}

export { visible };

/** The diff as DOM (text only, never HTML). */
export function diffNode(before: string, after: string): HTMLElement {
  const box = document.createElement('div');
  box.className = 'nba-cdiff';
  let warned = false;
  for (const line of lineDiff(before, after)) {
    const row = document.createElement('div');
    row.className = line.kind === '+' ? 'nba-cdiff-add' : line.kind === '-' ? 'nba-cdiff-del' : 'nba-cdiff-ctx';
    const shown = visible(line.text);
    warned = warned || shown.warned;
    row.textContent = `${line.kind} ${shown.text}`;
    box.appendChild(row);
  }
  if (warned) {
    const note = document.createElement('div');
    note.className = 'nba-cdiff-warn';
    note.textContent = WARNING;
    box.prepend(note);
  }
  return box;
}
