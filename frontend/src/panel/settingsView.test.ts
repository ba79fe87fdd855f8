import { describe, expect, it } from 'vitest';

import { keyWords, urlWords } from './settingsView';
import type { ProviderSettings } from './protocol';

const provider = (key: Partial<ProviderSettings['key']>, url: Partial<ProviderSettings['base_url']> = {}): ProviderSettings => ({
  id: 'ollama', label: 'Local', key_variable: 'OLLAMA_API_KEY', models: [],
  key: { source: null, ends: null, required: false, ...key },
  base_url: { variable: 'OLLAMA_BASE_URL', value: null, source: null, default: 'http://localhost:11434/v1', ...url }
});

describe('what the Settings say of a key: where it is and how it ends, never the key', () => {
  it('names a stored key by its end', () => {
    expect(keyWords(provider({ source: 'stored', ends: 'Lk5x' }))).toBe('stored, ends in …Lk5x');
  });
  it('says an environment key wins', () => {
    expect(keyWords(provider({ source: 'environment', ends: 'abcd' }))).toBe(
      'from the environment ($OLLAMA_API_KEY, ends in …abcd); it wins over a stored key');
  });
  it('says when there is none, and whether one is needed', () => {
    expect(keyWords(provider({}))).toBe('no key (none needed for most local servers)');
    expect(keyWords(provider({ required: true }))).toBe('no key');
  });
});

describe('what the Settings say of a base URL', () => {
  it('the default, a stored one, the environment\'s', () => {
    expect(urlWords(provider({}))).toBe('http://localhost:11434/v1 (the default)');
    expect(urlWords(provider({}, { source: 'stored', value: 'http://127.0.0.1:8000/v1' }))).toBe('http://127.0.0.1:8000/v1 (stored)');
    expect(urlWords(provider({}, { source: 'environment', value: 'http://h/v1' }))).toBe('http://h/v1 (from $OLLAMA_BASE_URL)');
  });
});
