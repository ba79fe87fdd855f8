/**
 * The characters a person cannot see as they are, generated from nbagent/safety/hidden.json (the kernel reads
 * the same file) by `npm run protocol`: edit the list, not this file (a test fails when they differ).
 */

/** Each kind's characters, as the body of a regular expression character class (flag `u`). */
export const KINDS = {
  control: '\u0000-\u0008\u000b-\u000c\u000e-\u001f\u007f-\u009f',
  bidi: '\u061c\u200e-\u200f\u202a-\u202e\u2066-\u2069',
  invisible: '\u00ad\u034f\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200c\u2060-\u2065\u206a-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}',
  emoji_parts: '\u200d\ufe00-\ufe0f',
  separators: '\u2028-\u2029',
} as const;

/** Every hidden character (a carriage return only when no newline follows it): what must be shown. */
export const HIDDEN_SOURCE = '\\r(?!\\n)|[\u0000-\u0008\u000b-\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e-\u200f\u202a-\u202e\u2066-\u2069\u00ad\u034f\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200c\u2060-\u2065\u206a-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}\u200d\ufe00-\ufe0f\u2028-\u2029]';

/** The same, but the joiner and variation selectors that emoji are made of (text to read, not to approve). */
export const HIDDEN_PROSE_SOURCE = '\\r(?!\\n)|[\u0000-\u0008\u000b-\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e-\u200f\u202a-\u202e\u2066-\u2069\u00ad\u034f\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200c\u2060-\u2065\u206a-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}\u2028-\u2029]';
