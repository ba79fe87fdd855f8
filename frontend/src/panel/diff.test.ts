import { describe, expect, it } from 'vitest';

import { lineDiff, visible } from './diff';

const shown = (before: string, after: string) => lineDiff(before, after).map(l => `${l.kind}${l.text}`);

describe('lineDiff: the review of a proposed edit', () => {
  it('marks the changed line only, with the rest as context', () => {
    expect(shown('total = 10\nrate = total / count\nrate', 'total = 10\nrate = total / max(count, 1)\nrate')).toEqual([
      ' total = 10',
      '-rate = total / count',
      '+rate = total / max(count, 1)',
      ' rate'
    ]);
  });

  it('shows a new cell as all added, a deleted one as all removed, an unchanged one as context', () => {
    expect(shown('', 'a\nb')).toEqual(['+a', '+b']);
    expect(shown('a\nb', '')).toEqual(['-a', '-b']);
    expect(shown('a\nb', 'a\nb')).toEqual([' a', ' b']);
  });

  it('keeps the longest common part in order (inserted and removed lines between)', () => {
    expect(shown('a\nb\nc\nd', 'a\nc\nx\nd')).toEqual([' a', '-b', ' c', '+x', ' d']);
  });

  it('every line of both sides appears exactly once, in order', () => {
    const before = 'one\ntwo\nthree\nfour\nfive\nsix';
    const after = 'zero\ntwo\nthree\n3.5\nfive\nsix\nseven';
    const diff = lineDiff(before, after);
    expect(diff.filter(l => l.kind !== '+').map(l => l.text).join('\n')).toBe(before);
    expect(diff.filter(l => l.kind !== '-').map(l => l.text).join('\n')).toBe(after);
  });

  it('past its limit shows the whole old text removed and the new added (no quadratic table)', () => {
    const big = Array.from({ length: 1600 }, (_, i) => `line ${i}`).join('\n');
    const diff = lineDiff(big, big + '\nmore');
    expect(diff.length).toBe(1600 + 1601);
    expect(diff[0]).toEqual({ kind: '-', text: 'line 0' });
    expect(diff[1600]).toEqual({ kind: '+', text: 'line 0' });
  });
});

describe('visible: every byte of an approval is shown as it is', () => {
  it('names bidi controls and invisible characters, and warns', () => {
    expect(visible('a\u202eb\u200bc\ufeff')).toEqual({ text: 'a⟨U+202E⟩b⟨U+200B⟩c⟨U+FEFF⟩', warned: true });
    expect(visible('x\u2066y\u2069')).toEqual({ text: 'x⟨U+2066⟩y⟨U+2069⟩', warned: true });
  });

  it('leaves ordinary text, tabs and other scripts alone', () => {
    expect(visible('é\tλ — שלום')).toEqual({ text: 'é\tλ — שלום', warned: false });
  });
});
