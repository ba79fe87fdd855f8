/**
 * The panel's conversations: "Conversations" lists this notebook's stored conversations (newest first, each
 * with the words the person started it with, when, its runs and calls); a click on one opens it (its messages
 * are shown, and the next prompt continues it); "New chat" starts a fresh one, which the box then continues.
 * A conversation the session store does not verify is listed, greyed, with why, and cannot be clicked
 * (the kernel refuses it too: nbagent/jupyter/panel/conversations.py).
 *
 * Everything shown is text (textContent): the first words are the person's, but the file they come from is in
 * the workspace, which anyone who can write it could have written. So are a stored conversation's messages
 * (`storedConversation`), each with what the model was sent with it folded under it.
 */
import type { ConversationItem, ConversationsResult, StoredConversation } from './protocol';
import { el } from './el';

/** "3 runs · 5 calls · 2 h ago" (when: relative to `now`, both in seconds). */
export function conversationMeta(item: ConversationItem, now: number): string {
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const parts = [plural(item.runs, 'run'), plural(item.calls, 'call'), ago(item.updated, now)];
  if (item.side) {
    parts.push('a Fix or Explain');
  }
  return parts.join(' · ');
}

/** How long ago `then` was, in words (seconds since 1970). */
export function ago(then: number, now: number): string {
  const s = Math.max(0, now - then);
  if (s < 60) {
    return 'just now';
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min ago`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)} h ago`;
  }
  const days = Math.floor(s / 86400);
  return days === 1 ? 'yesterday' : days < 30 ? `${days} days ago` : new Date(then * 1000).toLocaleDateString();
}

/** The list: one row per conversation; `pick` continues a verified one (an unverified one is not clickable). */
export function conversationList(result: ConversationsResult, shown: string | null,
  pick: (id: string) => void, now = Date.now() / 1000): HTMLElement {
  const box = el('div', 'nba-panel-convs');
  if (!result.conversations.length) {
    box.append(el('div', 'nba-panel-note', 'No stored conversation of this notebook yet: your first prompt starts one.'));
    return box;
  }
  for (const item of result.conversations) {
    const row = el('button', 'nba-panel-conv-item') as HTMLButtonElement;
    row.dataset.session = item.id;
    const first = el('span', 'nba-panel-conv-first', item.first);
    const meta = el('span', 'nba-panel-conv-meta', conversationMeta(item, now));
    row.append(first, meta);
    if (item.id === shown) {
      row.classList.add('nba-panel-conv-shown');
      meta.append(document.createTextNode(' · shown'));
    } else if (item.id === result.current && shown === null) {
      meta.append(document.createTextNode(' · current'));
    }
    if (!item.resumable) {
      row.disabled = true;
      row.classList.add('nba-panel-conv-unverified');
      row.append(el('span', 'nba-panel-conv-why', `cannot be continued: ${item.why ?? 'it does not verify'}`));
      row.title = item.why ?? '';
    } else {
      row.title = `Continue this conversation (${item.id}${item.model ? `, ${item.model}` : ''})`;
      row.onclick = () => pick(item.id);
    }
    box.append(row);
  }
  if (result.more > 0) {
    box.append(el('div', 'nba-panel-note', `and ${result.more} older (%agent --sessions lists them all)`));
  }
  return box;
}

/** What the model was sent with the person's words (a button's instructions, the cell, its error), folded. */
export function contextFold(sent: string): HTMLElement {
  const fold = el('details', 'nba-context');
  const lines = sent.split('\n').length;
  fold.append(el('summary', '', `what nbagent was sent with it (${lines} line${lines === 1 ? '' : 's'})`),
    el('div', 'nba-pre', sent));
  return fold;
}

/** A stored conversation's messages, under a line that says which it is: the one `picked` from the list, or the
 * `latest` one, shown after a restart or a reload; the next prompt continues it. Fills `into`. */
export function storedConversation(into: HTMLElement, stored: StoredConversation, how: 'picked' | 'latest'): void {
  const runs = `${stored.runs} run${stored.runs === 1 ? '' : 's'}`;
  const title = stored.error
    ? String(stored.error)
    : how === 'picked'
      ? `The conversation that began "${(stored.messages ?? []).find(m => m.role === 'you')?.text ?? stored.id}" ` +
        `(${runs}), picked from the list: your next prompt continues it.`
      : `Stored conversation ${stored.id} (${runs}): the next prompt continues it (as %agent --resume).`;
  into.append(el('div', 'nba-panel-stored-title', title));
  for (const m of stored.messages ?? []) {
    const item = el('div', `nba-panel-msg nba-panel-msg-${m.role === 'you' ? 'you' : 'agent'}`);
    const text = el('span', 'nba-panel-text', m.text);
    if (typeof m.context === 'string') {
      text.append(contextFold(m.context));
    }
    item.append(el('span', 'nba-panel-role', m.role === 'you' ? 'YOU' : 'nbagent'), text);
    into.append(item);
  }
}
