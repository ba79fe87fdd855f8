import { describe, expect, it } from 'vitest';

import { readFileSync } from 'fs';
import { join } from 'path';

import { TEXT_LIMIT, HTML_LIMIT, applyEdit, cellName, editRefusal, isNotebookId, replaceOnce, staleReason, trimOutput } from './cellEdits';
import type { CellShown } from './cellEdits';

describe('replaceOnce: the one edit edit_cell makes', () => {
  it('replaces the one occurrence and says where it was', () => {
    expect(replaceOnce('a = 1\nb = a / n\n', 'a / n', 'a / max(n, 1)')).toEqual({
      ok: true,
      source: 'a = 1\nb = a / max(n, 1)\n',
      at: 10
    });
  });

  it('refuses text that is not there, an empty old text, and text that is there twice', () => {
    expect(replaceOnce('x = 1', 'y', 'z')).toEqual({ ok: false, why: 'missing' });
    expect(replaceOnce('x = 1', '', 'z')).toEqual({ ok: false, why: 'missing' });
    expect(replaceOnce('x = x', 'x', 'y')).toEqual({ ok: false, why: 'ambiguous' });
  });

  it('treats the old text literally (no patterns) and keeps the rest byte for byte', () => {
    const source = 'm = re.match(r"a.*b$", s)\n\t# ⟨tab⟩ and “quotes”\n';
    const done = replaceOnce(source, 'r"a.*b$"', 'r"^a.+b$"');
    expect(done).toEqual({ ok: true, source: source.replace('r"a.*b$"', 'r"^a.+b$"'), at: 13 });
    expect(replaceOnce('$&$&', '$&', 'x')).toEqual({ ok: false, why: 'ambiguous' });
    expect(applyEdit('a$&b', '$&', '$$')).toBe('a$$b');
  });

  it('applyEdit is the preview the cell review shows: null where the kernel would refuse', () => {
    expect(applyEdit('total / count', 'count', 'max(count, 1)')).toBe('total / max(count, 1)');
    expect(applyEdit('total / count', 'counts', 'x')).toBeNull();
    expect(applyEdit('count / count', 'count', 'x')).toBeNull();
  });

  it('says why in words the model reads', () => {
    expect(editRefusal('c1', 'missing')).toMatch(/not in cell c1 any more; nothing was done/);
    expect(editRefusal('c1', 'ambiguous')).toMatch(/more than once in cell c1; nothing was done/);
  });
});

describe('staleReason: a change to a cell that moved on is refused', () => {
  it('passes when nothing is expected or the cell holds what was expected', () => {
    expect(staleReason('c1', 'x = 1', undefined)).toBeNull();
    expect(staleReason('c1', 'x = 1', null)).toBeNull();
    expect(staleReason('c1', 'x = 1', 'x = 1')).toBeNull();
  });

  it('refuses any difference, even one of whitespace', () => {
    expect(staleReason('c1', 'x = 1 ', 'x = 1')).toMatch(/cell c1 changed since you last read it/);
    expect(staleReason('c1', '', 'x = 1')).toMatch(/nothing was done/);
  });

  it('names the cell as the person sees it, with the id the model uses', () => {
    expect(staleReason('c1', 'x = 2', 'x = 1', '[4] x = 2')).toMatch(/^\[4\] x = 2 \(cell c1\) changed since you last read it/);
    expect(editRefusal('c1', 'missing', '[4] x = 2')).toMatch(/not in \[4\] x = 2 \(cell c1\) any more/);
  });
});

describe('trimOutput: what the kernel is told of an output', () => {
  it('keeps both ends of long text and says it was cut', () => {
    const text = 'A'.repeat(TEXT_LIMIT) + 'B'.repeat(TEXT_LIMIT);
    const out = trimOutput({ output_type: 'stream', name: 'stdout', text });
    expect(out.truncated).toBe(true);
    expect(out.text!.startsWith('A'.repeat(TEXT_LIMIT / 2) + '\n…\n')).toBe(true);
    expect(out.text!.endsWith('B'.repeat(TEXT_LIMIT / 2))).toBe(true);
    expect(out.text!.length).toBe(TEXT_LIMIT + 3);
  });

  it('joins text given as lines, and leaves short text whole', () => {
    expect(trimOutput({ output_type: 'stream', name: 'stdout', text: ['a\n', 'b\n'] })).toEqual({
      output_type: 'stream',
      name: 'stdout',
      text: 'a\nb\n'
    });
  });

  it('names images, video and PDF without their bytes; keeps both ends of long HTML', () => {
    const html = '<table>' + 'x'.repeat(HTML_LIMIT * 3) + '<p>5 rows × 3 columns</p>';
    const out = trimOutput({
      output_type: 'display_data',
      data: { 'image/png': 'iVBOR...', 'video/mp4': 'AAAA', 'application/pdf': 'JVBER', 'text/html': html },
      metadata: {}
    });
    expect(out.data).toMatchObject({ 'image/png': null, 'video/mp4': null, 'application/pdf': null });
    const shown = out.data!['text/html'] as string;
    expect(shown.length).toBe(HTML_LIMIT);
    expect(shown.startsWith('<table>')).toBe(true);
    expect(shown.endsWith('<p>5 rows × 3 columns</p>')).toBe(true);
  });

  it('keeps small JSON data, drops JSON too large to send, cuts long plain text', () => {
    const out = trimOutput({
      output_type: 'execute_result',
      execution_count: 3,
      data: {
        'application/json': { a: 1 },
        'application/vnd.big+json': { rows: 'y'.repeat(TEXT_LIMIT + 1) },
        'text/plain': ['z'.repeat(TEXT_LIMIT), 'tail']
      },
      metadata: {}
    });
    expect(out.data!['application/json']).toEqual({ a: 1 });
    expect(out.data!['application/vnd.big+json']).toBeNull();
    expect(out.data!['text/plain']).toBe('z'.repeat(TEXT_LIMIT));
    expect(out.execution_count).toBe(3);
  });

  it("keeps a traceback's last lines only", () => {
    const traceback = Array.from({ length: 30 }, (_, i) => `line ${i}`);
    const out = trimOutput({ output_type: 'error', ename: 'KeyError', evalue: "'Region'", traceback });
    expect(out.traceback).toEqual(traceback.slice(-12));
    expect(out.ename).toBe('KeyError');
  });
});

describe('isNotebookId', () => {
  it('takes what the page makes and nothing that could smuggle markup or paths', () => {
    expect(isNotebookId('0f8fad5b-d9cb-469f-a165-70867728950e')).toBe(true);
    expect(isNotebookId('short')).toBe(false);
    expect(isNotebookId('../../etc/passwd-xxxx')).toBe(false);
    expect(isNotebookId('<img src=x onerror=1>')).toBe(false);
    expect(isNotebookId(12345678)).toBe(false);
  });
});

describe('cellName: a cell named as the person sees it, as the kernel names it', () => {
  const table = JSON.parse(readFileSync(join(__dirname, '../../../tests/fixtures/cell_names.json'), 'utf-8')) as {
    cases: { cell: CellShown; name: string }[];
  };

  it('gives every name of the shared table (the kernel\'s cell_name passes the same table)', () => {
    expect(table.cases.length).toBeGreaterThan(10);
    for (const { cell, name } of table.cases) {
      expect(cellName(cell)).toBe(name);
    }
  });
});
