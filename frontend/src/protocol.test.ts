/**
 * The comm protocols are written once: each room's protocol.ts is what its JSON Schema (in the Python package,
 * where the kernel validates against it) makes. Edit the schema and run `npm run protocol`.
 */
import { readFile } from 'node:fs/promises';

import { describe, expect, it } from 'vitest';

// @ts-expect-error: a plain ES module script, without type declarations
import { ROOMS, generate, typesPath } from '../scripts/protocol.mjs';

describe('the generated protocol types', () => {
  for (const room of ROOMS as string[]) {
    it(`${room}/protocol.ts is what nbagent/jupyter/${room}/protocol.json makes`, async () => {
      const committed = await readFile(typesPath(room), 'utf8');
      expect(committed).toBe(await generate(room));
    });
  }
});
