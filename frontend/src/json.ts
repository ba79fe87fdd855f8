/**
 * The comms' messages as the JSON they are. The generated protocol types (notebook/protocol.ts,
 * panel/protocol.ts) describe JSON only, but TypeScript gives an interface no index signature, so it does not
 * take one for `JSONObject`: this says so once, for a value whose type is one of them.
 */
import type { JSONObject } from '@lumino/coreutils';

export function asJSON<T extends object>(message: T): JSONObject {
  return message as unknown as JSONObject;
}
