/**
 * Copy and Insert as cell on the code blocks the model wrote, in notebook outputs and in the panel.
 *
 * nbagent/render/markdown.py marks a fenced block of the model's text as `<pre class="nba-code-block
 * nba-lang-LANG"><code>…</code></pre>` inside the model-text container (`.nba-md`). A MutationObserver on
 * the notebook (and one on the panel) finds those blocks as they are drawn (a live view's HTML is replaced on
 * every update, a static output or a reopened notebook is drawn once), batched to one look per animation
 * frame over the nodes that were added, and wraps each block with two buttons. The buttons live only in the
 * page: the outputs the notebook saves hold the block as the kernel wrote it, nothing more.
 *
 * Reads HTML someone else may have written: a tool's result sits in the same view, and a notebook's other
 * outputs are on the page too, saved ones among them (a notebook from the web can hold nbagent's markup,
 * classes and all). In a notebook, a block gets buttons only when it carries the mark of the notebook's live
 * kernel (`nba-live-…`, new in each kernel, said by the kernel in its hello over the comm): no saved output
 * can, since nobody knew it when the output was written. The sanitizer never lets a result keep the marker classes or `.nba-md`
 * (see nbagent/safety/sanitize.py); here, on top of that, a block gets buttons only when it is inside an nbagent
 * view (`.nba`, `.nba-view`), inside a `.nba-md` that is not part of a tool call's row, a result, a tool's
 * presentation or a sanitized fragment (`.nba-call`, `.nba-result`, `.nba-presentation`, `.nba-safe`), and
 * only when it has exactly the shape render_markdown writes (one `code`, in it text and class-only `span`s):
 * then what it shows is its text, and that text (`textContent`) is what Copy copies and Insert inserts, as
 * a cell that is not run. Hidden characters in it are already shown as `⟨U+XXXX NAME⟩` by the kernel; a block
 * that holds one raw was not drawn by nbagent and gets no buttons. render.css draws a block's text in the order
 * it is inserted (no bidi reordering, even by right-to-left letters) and wraps long lines (nothing past the
 * block's edge).
 */
import { NotebookPanel } from '@jupyterlab/notebook';

import { watchAdded } from './added';
import { HIDDEN } from './shown';

const BLOCK = 'pre.nba-code-block';
const NOT_MODEL_TEXT = '.nba-call, .nba-result, .nba-presentation, .nba-safe';
const PYTHON = new Set(['', 'python', 'py', 'python3', 'ipython', 'ipython3', 'pycon']);
const SHELL = new Set(['bash', 'sh', 'shell', 'console']);
const MARKDOWN = new Set(['markdown', 'md']);
/** Where a block's Insert puts its cell: below `index` of `notebook` (-1: at the top). */
export type InsertPlace = { notebook: NotebookPanel; index: number; from?: object };

/**
 * The cells Insert made from each cell's blocks (by the source cell's model, the made cells' ids): the next
 * block's cell goes after those still right below it, so successive blocks land in the order they are inserted.
 */
const made = new WeakMap<object, Set<string>>();

/** The language a block was marked with ('' for none). */
export function blockLanguage(pre: Element): string {
  for (const cls of Array.from(pre.classList)) {
    if (cls.startsWith('nba-lang-')) {
      return cls.slice('nba-lang-'.length);
    }
  }
  return '';
}

/** The block's code element, when the block has exactly the shape nbagent writes; else null. */
function codeOf(pre: Element): HTMLElement | null {
  if (pre.children.length !== 1 || pre.firstElementChild!.tagName !== 'CODE' || pre.hasAttribute('style')) {
    return null;
  }
  const code = pre.firstElementChild as HTMLElement;
  if (code.attributes.length) {
    return null;
  }
  for (const part of Array.from(code.querySelectorAll('*'))) {
    if (part.tagName !== 'SPAN' || part.children.length || part.attributes.length > 1
        || (part.attributes.length === 1 && !/^(hl-[\w-]+\s*)+$/.test(part.getAttribute('class') ?? ''))) {
      return null;
    }
  }
  return code;
}

/**
 * The class the code blocks of each notebook's kernel carry (nbagent.render.markdown.LIVE_MARK: new in each
 * kernel), as the kernel said in its hello over the notebook comm, which only the live kernel can send.
 */
const liveMarks = new WeakMap<object, string>();
const rescans = new WeakMap<object, () => void>();
const MARK = /^nba-live-[0-9a-f]{24}$/;

/** The kernel of `panel` said its blocks carry `mark`: its blocks get buttons, any other block loses them. */
export function setLiveMark(panel: object, mark: unknown): void {
  if (typeof mark === 'string' && MARK.test(mark) && liveMarks.get(panel) !== mark) {
    liveMarks.set(panel, mark);
    rescans.get(panel)?.();
  }
}

/** The mark `panel`'s kernel said its blocks carry, or null before it has. */
export function liveMark(panel: object): string | null {
  return liveMarks.get(panel) ?? null;
}

/**
 * Whether `pre` is a code block of the model's text (see the module's docstring). `mark`: in a notebook, the
 * class its kernel's blocks carry (null: none known yet, so no block qualifies). A notebook's outputs are
 * saved and may come from anywhere (a notebook from the web holds whatever markup its author wrote, classes
 * and styles included): only a block drawn by the live kernel carries its mark, which nobody knew before.
 */
export function isModelCode(pre: Element, mark?: string | null): boolean {
  if (!pre.matches(BLOCK) || !pre.closest('.nba, .nba-view')) {
    return false;
  }
  if (mark !== undefined && (mark === null || !pre.classList.contains(mark) || !inCodeOutput(pre))) {
    return false;
  }
  const md = pre.closest('.nba-md');
  const code = md && !md.closest(NOT_MODEL_TEXT) && !pre.closest(NOT_MODEL_TEXT) ? codeOf(pre) : null;
  // What the kernel never leaves raw in a block: every hidden character is shown there as `⟨U+XXXX NAME⟩`
  // (sanitize.py `visible`, from the same list as HIDDEN). A block that holds one raw was not written by nbagent
  // (a saved output can hold any markup): no buttons, since it would insert what it hides.
  return code !== null && !HIDDEN.test(code.textContent ?? '');
}

/**
 * Whether a notebook's block sits in a code cell's output, where only what ran puts markup. A Markdown cell
 * renders whatever its source says, and its source is text anyone can write (the model can insert one): the
 * live mark is no secret from what reads the saved notebook, so a block there is never the live kernel's.
 */
function inCodeOutput(pre: Element): boolean {
  return pre.closest('.jp-OutputArea-output') !== null && pre.closest('.jp-MarkdownCell, .jp-MarkdownOutput') === null;
}

/** Where the page's own nodes begin: what is inside is the output's HTML (or nbagent's panel). */
const OUTPUT_EDGE = '.jp-OutputArea-output, #nbagent-panel, .jp-Cell, body';

/**
 * Whether part of the block is kept from being seen as it is clicked: the block or an element around it
 * (inside the output, whose HTML anyone may have written: a notebook's saved output keeps its inline
 * styles) clips it (overflow hidden) to a smaller box, or its text is drawn invisible (transparent,
 * hidden, tiny). Then Copy and Insert do nothing: they would put in what nobody saw. Checked as the
 * button is clicked, when the block is on the screen and laid out.
 */
export function partHidden(pre: HTMLElement): boolean {
  // what scrolls is there to see (a scroll bar says so); what is clipped is not
  const clips = (style: CSSStyleDeclaration) => /hidden|clip/.test(`${style.overflowX} ${style.overflowY}`);
  if (clips(getComputedStyle(pre)) && (pre.scrollHeight > pre.clientHeight + 1 || pre.scrollWidth > pre.clientWidth + 1)) {
    return true;
  }
  const box = pre.getBoundingClientRect();
  for (let el = pre.parentElement; el && !el.matches(OUTPUT_EDGE); el = el.parentElement) {
    const style = getComputedStyle(el);
    if (clips(style)) {
      const r = el.getBoundingClientRect();
      if (r.top > box.top + 1 || r.bottom < box.bottom - 1 || r.left > box.left + 1 || r.right < box.right - 1) {
        return true;
      }
    }
  }
  const code = codeOf(pre);
  for (const el of code ? [code, ...Array.from(code.querySelectorAll('span'))] : []) {
    const style = getComputedStyle(el);
    const alpha = /^rgba\(.*,\s*([\d.]+)\)$/.exec(style.color);
    if (style.visibility !== 'visible' || (alpha && parseFloat(alpha[1]) < 0.3) || parseFloat(style.fontSize) < 6) {
      return true;
    }
  }
  return false;
}

/** The text the block shows (its last line break left out). */
export function blockText(pre: Element): string {
  return (codeOf(pre)?.textContent ?? '').replace(/\n+$/, '');
}

/** What Insert as cell makes of a block, or null when it offers only Copy (a language that is not run here). */
export function cellFor(pre: Element): { cell_type: 'code' | 'markdown'; source: string } | null {
  const lang = blockLanguage(pre);
  const text = blockText(pre);
  if (PYTHON.has(lang)) {
    return { cell_type: 'code', source: text };
  }
  if (SHELL.has(lang)) {
    return { cell_type: 'code', source: /^%%(bash|sh|script)\b/.test(text) ? text : `%%bash\n${text}` };
  }
  if (MARKDOWN.has(lang)) {
    return { cell_type: 'markdown', source: text };
  }
  return null;
}

/** A new cell below `place`, as one undoable step of the notebook, not run; it becomes the active cell. */
export function insertBelow(place: InsertPlace, cell: { cell_type: 'code' | 'markdown'; source: string }): void {
  const panel = place.notebook;
  const shared = panel.model!.sharedModel;
  const at = Math.max(0, Math.min(place.index + 1, panel.content.widgets.length));
  // the notebook's undo manager (YNotebook has one; the ISharedNotebook interface does not say so)
  const undo = (shared as { undoManager?: { stopCapturing(): void } }).undoManager;
  undo?.stopCapturing?.(); // its own step: not merged with an output that changed just before
  shared.transact(() => {
    shared.insertCell(at, { cell_type: cell.cell_type, source: cell.source, metadata: {} });
  });
  undo?.stopCapturing?.();
  const notebook = panel.content;
  notebook.activeCellIndex = at;
  notebook.mode = 'command';
  const inserted = notebook.widgets[at];
  if (inserted && place.from) {
    const ids = made.get(place.from) ?? new Set<string>();
    made.set(place.from, ids.add(inserted.model.id));
  }
  if (inserted) {
    void notebook.scrollToCell(inserted, 'smart').catch(() => undefined);
  }
}

async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // no clipboard API (an http page other than localhost) or no permission: the old way
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.append(area);
    area.select();
    let done = false;
    try {
      done = document.execCommand('copy');
    } catch {
      done = false;
    }
    area.remove();
    return done;
  }
}

function button(cls: string, text: string, label: string): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `nba-code-btn ${cls}`;
  b.textContent = text;
  b.title = label;
  b.setAttribute('aria-label', label);
  // a click in an output makes its cell the active one; it must not also start a drag or an edit
  b.addEventListener('mousedown', event => event.stopPropagation());
  // a key on the focused button is the button's, never a notebook shortcut: Lumino looks for this attribute
  // from the focused element up, but stops at the first element a shortcut's selector matches (the button
  // itself matches `.jp-Notebook.jp-mod-commandMode :focus:not(:read-write)`), so it must be on the button
  b.setAttribute('data-lm-suppress-shortcuts', '');
  return b;
}

function flash(b: HTMLButtonElement, text: string, back: string): void {
  b.textContent = text;
  b.classList.add('nba-code-done');
  window.setTimeout(() => {
    b.textContent = back;
    b.classList.remove('nba-code-done');
  }, 1500);
}

/** Wrap one block with its buttons. */
function decorate(pre: HTMLElement, place: (pre: HTMLElement) => InsertPlace | null): void {
  const wrap = document.createElement('div');
  wrap.className = 'nba-code-wrap';
  const tools = document.createElement('div');
  tools.className = 'nba-code-tools';
  tools.setAttribute('data-lm-suppress-shortcuts', ''); // Enter on a button presses it, not the notebook's shortcut
  const lang = blockLanguage(pre);
  const copy = button('nba-code-copy', 'Copy', lang ? `Copy this ${lang} code` : 'Copy this code');
  copy.addEventListener('click', event => {
    event.stopPropagation();
    if (partHidden(pre)) {
      flash(copy, 'Part of it is hidden', 'Copy');
      return;
    }
    void copyText(blockText(pre)).then(ok => flash(copy, ok ? 'Copied' : 'Copy failed', 'Copy'));
  });
  tools.append(copy);
  if (cellFor(pre) !== null) {
    const markdown = MARKDOWN.has(lang);
    const insert = button('nba-code-insert', 'Insert as cell',
      markdown ? 'Insert as a new Markdown cell below' : 'Insert as a new code cell below (not run)');
    insert.addEventListener('click', event => {
      event.stopPropagation();
      if (partHidden(pre)) {
        flash(insert, 'Part of it is hidden', 'Insert as cell');
        return;
      }
      const cell = cellFor(pre);
      const where = place(pre);
      if (cell && where) {
        insertBelow(where, cell);
        flash(insert, 'Inserted', 'Insert as cell');
      }
    });
    tools.append(insert);
  }
  pre.parentNode!.insertBefore(wrap, pre);
  wrap.append(tools, pre);
}

/** Whether a block is ready for buttons: decorated already, or still being written (the cursor follows it). */
function pending(pre: HTMLElement): boolean {
  return !!pre.parentElement?.classList.contains('nba-code-wrap')
    || !!pre.nextElementSibling?.classList.contains('nba-cursor');
}

/**
 * Give every model code block under `root` its buttons, now and whenever one is drawn. `place` says where
 * a block's Insert puts its cell (null: nowhere, the button does nothing). Returns a function that stops.
 */
export function watchCodeBlocks(
  root: HTMLElement,
  place: (pre: HTMLElement) => InsertPlace | null,
  owner?: object
): () => void {
  const mark = () => (owner === undefined ? undefined : liveMark(owner));
  const scan = (nodes: Element[]) => {
    for (const node of nodes) {
      if (!node.isConnected) {
        continue;
      }
      const found = node.matches(BLOCK) ? [node] : Array.from(node.querySelectorAll(BLOCK));
      for (const pre of found as HTMLElement[]) {
        if (!pending(pre) && isModelCode(pre, mark())) {
          decorate(pre, place);
        }
      }
    }
  };
  // a block's own wrapping (added by decorate) is not looked at again
  const stop = watchAdded(root, scan, node => !node.classList.contains('nba-code-wrap'));
  if (owner !== undefined) {
    // a new kernel (a restart): the blocks of the one before lose their buttons, this one's get them
    rescans.set(owner, () => {
      for (const wrap of Array.from(root.querySelectorAll('.nba-code-wrap'))) {
        const pre = wrap.querySelector(BLOCK);
        if (pre && !isModelCode(pre, mark())) {
          wrap.replaceWith(pre);
        }
      }
      scan([root]);
    });
  }
  scan([root]);
  return stop;
}

/** Where Insert puts a block's cell in a notebook: below the cell whose output holds it, after the cells its
 * earlier blocks made there. */
export function belowItsCell(panel: NotebookPanel): (pre: HTMLElement) => InsertPlace | null {
  return pre => {
    const cells = panel.content.widgets;
    const own = cells.findIndex(cell => cell.node.contains(pre));
    if (own < 0) {
      return null;
    }
    const from = cells[own].model;
    const before = made.get(from);
    let index = own;
    while (before && index + 1 < cells.length && before.has(cells[index + 1].model.id)) {
      index++; // after the cells its blocks made already
    }
    return { notebook: panel, index, from };
  };
}
