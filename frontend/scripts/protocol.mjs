/**
 * The comm protocols' TypeScript types, generated from their JSON Schemas (written once, in the Python
 * package, where the kernel validates against them):
 *
 *   nbagent/jupyter/notebook/protocol.json  ->  src/notebook/protocol.ts
 *   nbagent/jupyter/panel/protocol.json     ->  src/panel/protocol.ts
 *
 *   node scripts/protocol.mjs           write them (`npm run protocol`; `npm run build` does it first)
 *   node scripts/protocol.mjs --check   fail if a committed file differs from what its schema makes
 */
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { compile } from 'json-schema-to-typescript';

const FRONTEND = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ROOMS = ['notebook', 'panel'];

export function schemaPath(room) {
  return join(FRONTEND, '..', 'nbagent', 'jupyter', room, 'protocol.json');
}

export function typesPath(room) {
  return join(FRONTEND, 'src', room, 'protocol.ts');
}

/** The TypeScript a room's schema makes. */
export async function generate(room) {
  const schema = JSON.parse(await readFile(schemaPath(room), 'utf8'));
  const banner =
    `/**\n * The \`nbagent.${room}\` comm's messages, generated from nbagent/jupyter/${room}/protocol.json by\n` +
    ' * `npm run protocol`: edit the schema, not this file (a test fails when they differ).\n */';
  return compile(schema, schema.title, {
    bannerComment: banner,
    unreachableDefinitions: true,
    additionalProperties: false,
    format: true,
    style: { singleQuote: true, printWidth: 120 }
  });
}

async function main() {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const room of ROOMS) {
    const made = await generate(room);
    const path = typesPath(room);
    if (check) {
      const committed = await readFile(path, 'utf8').catch(() => '');
      if (committed !== made) {
        console.error(`${path} differs from what ${schemaPath(room)} makes: run npm run protocol`);
        stale++;
      }
    } else {
      await writeFile(path, made);
      console.log(`wrote ${path}`);
    }
  }
  process.exit(stale ? 1 : 0);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main();
}
