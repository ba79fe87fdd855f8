/**
 * The page's list of hidden characters, made from the kernel's (written once, in the Python package):
 *
 *   nbagent/safety/hidden.json  ->  src/hidden.ts
 *
 *   node scripts/hidden.mjs           write it (`npm run protocol` does it; `npm run build` does that first)
 *   node scripts/hidden.mjs --check   fail if the committed file differs from what the list makes
 */
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const FRONTEND = join(dirname(fileURLToPath(import.meta.url)), '..');
export const SOURCE = join(FRONTEND, '..', 'nbagent', 'safety', 'hidden.json');
export const TARGET = join(FRONTEND, 'src', 'hidden.ts');

function escape(code) {
  const n = parseInt(code, 16);
  if (!Number.isInteger(n) || n < 0 || n > 0x10ffff) {
    throw new Error(`not a code point: ${code}`);
  }
  return n > 0xffff ? `\\u{${n.toString(16)}}` : `\\u${n.toString(16).padStart(4, '0')}`;
}

function charClass(spans) {
  return spans.map(span => span.split('-').map(escape).join('-')).join('');
}

/** The TypeScript the list makes. */
export async function generate() {
  const source = JSON.parse(await readFile(SOURCE, 'utf8'));
  const kinds = Object.keys(source.kinds);
  const prose = kinds.filter(kind => !source.prose_keeps.includes(kind));
  const lines = [
    '/**',
    ' * The characters a person cannot see as they are, generated from nbagent/safety/hidden.json (the kernel reads',
    ' * the same file) by `npm run protocol`: edit the list, not this file (a test fails when they differ).',
    ' */',
    '',
    '/** Each kind\'s characters, as the body of a regular expression character class (flag `u`). */',
    'export const KINDS = {',
    ...kinds.map(kind => `  ${kind}: '${charClass(source.kinds[kind])}',`),
    '} as const;',
    '',
    '/** Every hidden character (a carriage return only when no newline follows it): what must be shown. */',
    `export const HIDDEN_SOURCE = '\\\\r(?!\\\\n)|[${kinds.map(kind => charClass(source.kinds[kind])).join('')}]';`,
    '',
    '/** The same, but the joiner and variation selectors that emoji are made of (text to read, not to approve). */',
    `export const HIDDEN_PROSE_SOURCE = '\\\\r(?!\\\\n)|[${prose.map(kind => charClass(source.kinds[kind])).join('')}]';`,
    ''
  ];
  return lines.join('\n');
}

async function main() {
  const made = await generate();
  if (process.argv.includes('--check')) {
    const committed = await readFile(TARGET, 'utf8').catch(() => '');
    if (committed !== made) {
      console.error(`${TARGET} differs from what ${SOURCE} makes: run npm run protocol`);
      process.exit(1);
    }
  } else {
    await writeFile(TARGET, made);
    console.log(`wrote ${TARGET}`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main();
}
