/**
 * The panel's Settings view (kernel side: nbagent/jupyter/panel/settings.py): each provider with where its key
 * and base URL come from, a password field that sends a key to the kernel once (the kernel keeps it in the
 * person's key file, outside the notebook and the workspace, and answers only "stored, ends in …abcd"), a
 * Remove button; the model; and every `%config NBAgent` choice, edited by its kind.
 *
 * The key is never kept in the page: the field is emptied as it is sent, and nothing the kernel answers holds
 * it. Everything the kernel sends is written as text.
 */
import type { PanelHub } from './panelComm';
import type { OptionSetting, ProviderSettings, SettingsResult } from './protocol';
import { el } from './el';

function button(text: string, cls: string, onclick: () => void): HTMLButtonElement {
  const b = el('button', `jp-Button nba-set-button ${cls}`, text) as HTMLButtonElement;
  b.onclick = onclick;
  return b;
}

/** What the page says of a provider's key (never the key: where it is, and its last four characters). */
export function keyWords(p: ProviderSettings): string {
  const ends = p.key.ends ? `, ends in …${p.key.ends}` : '';
  if (p.key.source === 'environment') {
    return `from the environment ($${p.key_variable}${ends}); it wins over a stored key`;
  }
  if (p.key.source === 'stored') {
    return `stored${ends}`;
  }
  return p.key.required ? 'no key' : 'no key (none needed for most local servers)';
}

/** What the page says of a provider's base URL. */
export function urlWords(p: ProviderSettings): string {
  const b = p.base_url;
  if (b.source === 'environment') {
    return `${b.value} (from $${b.variable})`;
  }
  if (b.source === 'stored') {
    return `${b.value} (stored)`;
  }
  return `${b.default} (the default)`;
}

export class SettingsView {
  readonly node = el('div', 'nba-settings');
  private hub: PanelHub | null = null;
  /** Whether the kernel's settings are drawn (false: waiting for the kernel, or it could not answer). */
  drawn = false;
  /** Whether a request is on its way (the panel does not ask again meanwhile). */
  asking = false;
  private readonly errorEl = el('div', 'nba-settings-error');
  private readonly body = el('div', 'nba-settings-body');

  constructor() {
    this.node.append(el('div', 'nba-settings-title', 'Settings'), this.errorEl, this.body);
  }

  /** Ask the kernel for its settings and draw them. */
  async show(hub: PanelHub | null): Promise<void> {
    this.hub = hub;
    this.drawn = false;
    this.errorEl.textContent = '';
    if (!hub || hub.state !== 'ready') {
      this.body.textContent = '';
      const why = !hub ? 'Open a notebook: its kernel keeps the settings.'
        : hub.state === 'connecting' ? 'Connecting to the kernel…' : hub.absentText();
      this.body.append(el('div', 'nba-panel-note', why));
      return;
    }
    await this.ask(() => hub.request('settings', {}));
  }

  private async ask(request: () => Promise<SettingsResult>): Promise<boolean> {
    this.asking = true;
    try {
      this.draw(await request());
      this.errorEl.textContent = '';
      return true;
    } catch (err) {
      this.errorEl.textContent = err instanceof Error ? err.message : String(err);
      return false;
    } finally {
      this.asking = false;
    }
  }

  private draw(state: SettingsResult): void {
    const hub = this.hub!;
    this.drawn = true;
    this.node.dataset.drawn = String(Number(this.node.dataset.drawn ?? 0) + 1); // each answer drawn
    this.body.textContent = '';
    const providers = el('div', 'nba-settings-providers');
    providers.append(el('div', 'nba-settings-head', 'Providers'), el('div', 'nba-settings-note',
      `Keys are kept in ${state.file} (readable by you only), never in the notebook or the workspace; ` +
      'a key set in the kernel\'s environment wins.'));
    for (const p of state.providers) {
      providers.append(this.provider(hub, p));
    }
    const options = el('div', 'nba-settings-options');
    options.append(el('div', 'nba-settings-head', 'Settings of this kernel (%config NBAgent)'));
    const models: string[] = [];
    for (const p of state.providers) {
      if (p.key.source) {
        models.push(...p.models);
      }
    }
    for (const o of state.options) {
      options.append(this.option(hub, o, models));
    }
    this.body.append(providers, options);
  }

  private provider(hub: PanelHub, p: ProviderSettings): HTMLElement {
    const box = el('div', `nba-settings-provider nba-provider-${p.id}`);
    box.dataset.provider = p.id;
    box.append(el('div', 'nba-settings-name', `${p.label} · ${p.id}:`));
    if (p.key_variable) {
      const row = el('div', 'nba-settings-row nba-settings-keyrow');
      row.append(el('span', 'nba-settings-label', 'API key'), el('span', 'nba-settings-key', keyWords(p)));
      if (p.key.source === 'stored') {
        row.append(button('Remove', 'nba-settings-remove', () =>
          void this.ask(() => hub.request('remove_key', { provider: p.id }))));
      }
      if (p.key.source !== 'environment') {
        const field = document.createElement('input');
        field.type = 'password';
        field.className = 'nba-settings-keyfield';
        field.autocomplete = 'off';
        field.placeholder = p.key.source === 'stored' ? 'a new key replaces it' : `paste the ${p.id} key`;
        const save = button('Store key', 'nba-settings-storekey', () => {
          const key = field.value;
          field.value = ''; // the page keeps no copy
          if (!key.trim()) {
            this.errorEl.textContent = 'Paste the key first.';
            return;
          }
          void this.ask(() => hub.request('set_key', { provider: p.id, key }));
        });
        row.append(field, save);
      }
      box.append(row);
    }
    if (p.base_url.variable) {
      const row = el('div', 'nba-settings-row nba-settings-urlrow');
      row.append(el('span', 'nba-settings-label', 'Base URL'), el('span', 'nba-settings-url', urlWords(p)));
      if (p.base_url.source !== 'environment') {
        const field = document.createElement('input');
        field.className = 'nba-settings-urlfield';
        field.placeholder = p.base_url.default;
        field.value = p.base_url.source === 'stored' ? String(p.base_url.value ?? '') : '';
        row.append(field, button('Save', 'nba-settings-saveurl', () =>
          void this.ask(() => hub.request('set_base_url', { provider: p.id, base_url: field.value }))));
        if (p.base_url.source === 'stored') {
          row.append(button('Reset', 'nba-settings-reseturl', () =>
            void this.ask(() => hub.request('set_base_url', { provider: p.id, base_url: null }))));
        }
      }
      box.append(row);
    }
    return box;
  }

  private option(hub: PanelHub, o: OptionSetting, models: string[]): HTMLElement {
    const row = el('div', `nba-settings-row nba-settings-option nba-option-${o.name}`);
    const label = el('span', 'nba-settings-label', o.name);
    label.title = o.help;
    row.append(label);
    const set = (value: string | number | boolean | null) =>
      void this.ask(() => hub.request('set_option', { name: o.name, value }));
    if (o.kind === 'choice') {
      const select = document.createElement('select');
      select.className = 'nba-settings-field';
      for (const c of o.choices ?? []) {
        const option = document.createElement('option');
        option.value = c;
        option.textContent = c;
        select.append(option);
      }
      select.value = String(o.value ?? '');
      select.onchange = () => set(select.value);
      row.append(select);
    } else if (o.kind === 'bool') {
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.className = 'nba-settings-field';
      box.checked = o.value === true;
      box.onchange = () => set(box.checked);
      row.append(box);
    } else if (o.kind === 'other') {
      row.append(el('span', 'nba-settings-note',
        (o.value !== null ? `${String(o.value)} · ` : '') + `set with %config NBAgent.${o.name} = ... in a cell`));
    } else {
      const field = document.createElement('input');
      field.className = 'nba-settings-field';
      field.value = o.value === null ? '' : String(o.value);
      field.placeholder = o.nullable ? 'not set' : '';
      if (o.name === 'model') {
        const list = document.createElement('datalist');
        list.id = `nbagent-settings-models-${Math.random().toString(36).slice(2)}`;
        for (const m of models) {
          const option = document.createElement('option');
          option.value = m;
          list.append(option);
        }
        field.setAttribute('list', list.id);
        field.placeholder = 'provider:model, or a Model variable\'s name';
        row.append(list);
      }
      row.append(field, button('Set', 'nba-settings-set', () => set(field.value)));
    }
    const first = o.help.split(/(?<=\.)\s/)[0]; // its first sentence; the whole help on hover
    const help = el('div', 'nba-settings-help', first);
    help.title = o.help;
    row.append(help);
    return row;
  }
}
