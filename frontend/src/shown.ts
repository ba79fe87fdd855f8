/**
 * The page's one way to show a value a person approves or reads before it runs: every hidden character
 * (control, bidi, invisible; the list is src/hidden.ts, made from the kernel's nbagent/safety/hidden.json) is
 * shown as `⟨U+XXXX⟩`, nothing is removed or cut, and the result goes into the page as text (textContent),
 * never as HTML. The kernel's counterpart is nbagent/safety/sanitize.py `visible` (it adds the character's
 * name: `⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩`).
 */
import { HIDDEN_PROSE_SOURCE, HIDDEN_SOURCE } from './hidden';

/** Whether `text` holds a hidden character (what `visible` would show). */
export const HIDDEN = new RegExp(HIDDEN_SOURCE, 'u');
const HIDDEN_ALL = new RegExp(HIDDEN_SOURCE, 'gu');
const HIDDEN_PROSE_ALL = new RegExp(HIDDEN_PROSE_SOURCE, 'gu');

export const WARNING = '⚠ it contains invisible, control or direction-changing characters, shown as ⟨U+…⟩';

function code(ch: string): string {
  return `⟨U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}⟩`;
}

/** `text` with every hidden character shown as `⟨U+XXXX⟩` (whole: nothing cut), and whether there was one. */
export function visible(text: string, prose = false): { text: string; warned: boolean } {
  let warned = false;
  const shown = String(text).replace(prose ? HIDDEN_PROSE_ALL : HIDDEN_ALL, ch => {
    warned = true;
    return code(ch);
  });
  return { text: shown, warned };
}

/** Put `value` into `node` as the person must see it: as text, hidden characters shown, whole. Returns
 * whether a hidden character was shown (the caller puts WARNING beside it). */
export function showText(node: HTMLElement, value: string): boolean {
  const shown = visible(value);
  node.textContent = shown.text;
  return shown.warned;
}
