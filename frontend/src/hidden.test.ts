/**
 * The page's list of hidden characters is the kernel's: src/hidden.ts is what nbagent/safety/hidden.json makes
 * (the kernel reads that file too). Edit the list and run `npm run protocol`.
 */
import { readFile } from 'node:fs/promises';

import { describe, expect, it } from 'vitest';

// @ts-expect-error: a plain ES module script, without type declarations
import { SOURCE, TARGET, generate } from '../scripts/hidden.mjs';
import { HIDDEN, visible } from './shown';

describe('the one list of hidden characters', () => {
  it('src/hidden.ts is what nbagent/safety/hidden.json makes', async () => {
    expect(await readFile(TARGET, 'utf8')).toBe(await generate());
  });

  it('every character of every range in the list is shown, and the ends of each range', async () => {
    const source = JSON.parse(await readFile(SOURCE, 'utf8'));
    for (const spans of Object.values(source.kinds) as string[][]) {
      for (const span of spans) {
        for (const end of span.split('-')) {
          const ch = String.fromCodePoint(parseInt(end, 16));
          expect(HIDDEN.test(`a${ch}b`)).toBe(true);
          expect(visible(`a${ch}b`).text).toBe(`a⟨U+${end.padStart(4, '0')}⟩b`);
        }
      }
    }
  });

  it('a carriage return only when no newline follows; tab, newline and letters of any script are left', () => {
    expect(visible('a\r\nb')).toEqual({ text: 'a\r\nb', warned: false });
    expect(visible('a\rb')).toEqual({ text: 'a⟨U+000D⟩b', warned: true });
    expect(visible('é\tλ — שלום\n')).toEqual({ text: 'é\tλ — שלום\n', warned: false });
    expect(visible('x\u{e0041}'.repeat(3)).text).toBe('x⟨U+E0041⟩'.repeat(3));
  });
});
