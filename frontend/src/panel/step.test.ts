import { describe, expect, it } from 'vitest';

import { stepLine } from './step';
import { ago, conversationMeta } from './conversationsView';

describe('stepLine', () => {
  it('names the step of the approved plan', () => {
    expect(stepLine({ n: 2, of: 3, text: 'Divide by max(count, 1)', planned: 3 })).toBe('Step 2 of 3: Divide by max(count, 1)');
  });
  it('says when the model counts other steps than the plan has', () => {
    expect(stepLine({ n: 1, of: 5, text: '', planned: 3 })).toBe('Step 1 of 5 (the approved plan has 3)');
  });
});

describe('conversation rows', () => {
  it('say runs, calls and when', () => {
    const item = { id: 'x', first: 'hi', updated: 1000, runs: 1, calls: 2, model: null, side: false, resumable: true };
    expect(conversationMeta(item, 1000 + 7200)).toBe('1 run · 2 calls · 2 h ago');
    expect(conversationMeta({ ...item, side: true }, 1030)).toBe('1 run · 2 calls · just now · a Fix or Explain');
    expect(ago(0, 86400 * 3)).toBe('3 days ago');
  });
});
