/**
 * The nbagent side panel: the current notebook's conversation, a prompt box that starts a run in its kernel
 * (./promptbox.ts), each run's card (./runcards.ts: its live view, drawn with that notebook's own widget manager,
 * so Approve / Deny / Always allow and Stop work here as in the cell, its static rendering once it ended, the
 * cells it changed with Undo, the names its code left only in the kernel with "Make cells"), the conversation's
 * model, mode, tools, cost and context gauge (./chips.ts), and the switches between the chat, the list of
 * conversations (./conversationsView.ts) and Settings (./settingsView.ts).
 *
 * What reaches the page is inert: the static rendering is HTML from the kernel and goes through JupyterLab's
 * sanitizer; everything else (labels, stored messages, errors) is written as text.
 */
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { PanelHub } from './panelComm';
import { Host, conversationReview } from './changelist';
import { conversationList, storedConversation } from './conversationsView';
import { conversationChips } from './chips';
import { PromptBox } from './promptbox';
import { RunCards } from './runcards';
import { SettingsView } from './settingsView';
import { el } from './el';

export class AgentPanel extends Widget {
  private notebook: NotebookPanel | null = null;
  private hub: PanelHub | null = null;
  private readonly statusEl = el('div', 'nba-panel-status');
  private readonly convEl = el('div', 'nba-panel-conv');
  private readonly storedEl = el('div', 'nba-panel-stored');
  private readonly listButton = el('button', 'jp-Button nba-panel-list', 'Conversations') as HTMLButtonElement;
  private readonly newButton = el('button', 'jp-Button nba-panel-newchat', 'New chat') as HTMLButtonElement;
  private readonly listEl = el('div', 'nba-panel-list-box');
  private readonly pathEl = el('div', 'nba-panel-path');
  private readonly settings = new SettingsView();
  private readonly settingsButton = el('button', 'jp-Button nba-panel-settings', 'Settings') as HTMLButtonElement;
  private readonly chat = el('div', 'nba-panel-chat');
  private readonly box = new PromptBox(() => this.hub, () => this.render());
  private readonly runs = new RunCards({
    visible: () => this.isVisible,
    host: (hub, nb) => this.host(hub, nb),
    follow: plan => this.box.run(plan, 'follow', null)
  });

  constructor(private readonly hubOf: (nb: NotebookPanel) => PanelHub) {
    super();
    this.id = 'nbagent-panel';
    this.addClass('nba-panel');
    this.title.caption = 'nbagent';
    const top = el('div', 'nba-panel-top');
    top.append(el('div', 'nba-panel-name', 'nbagent'), this.pathEl, this.settingsButton);
    this.settingsButton.title = 'Providers, API keys, the model and the %config NBAgent choices';
    this.settingsButton.onclick = () => void this.toggleSettings();
    this.settings.node.hidden = true;
    const chats = el('div', 'nba-panel-chats');
    this.listButton.title = 'This notebook\'s conversations: pick one to continue it';
    this.listButton.onclick = () => void this.toggleList();
    this.newButton.title = 'Start a new conversation (what is shown is put aside; the stored ones stay in the list)';
    this.newButton.onclick = () => {
      this.listEl.textContent = '';
      this.hub?.newChat();
      this.box.focus();
    };
    chats.append(this.listButton, this.newButton);
    this.chat.append(chats, this.listEl, this.statusEl, this.convEl, this.storedEl, this.runs.node, this.box.node);
    this.node.append(top, this.settings.node, this.chat);
  }

  /** The notebook whose conversation the panel shows. */
  get notebookPanel(): NotebookPanel | null {
    return this.notebook;
  }

  /** Show this notebook's conversation (the current notebook changed). */
  follow(nb: NotebookPanel | null): void {
    if (nb === this.notebook) {
      return;
    }
    if (this.hub) {
      this.hub.changed.disconnect(this.render, this);
    }
    this.notebook = nb;
    this.box.about = null;
    this.hub = nb ? this.hubOf(nb) : null;
    if (this.hub) {
      this.hub.changed.connect(this.render, this);
    }
    this.runs.clear();
    this.listEl.textContent = '';
    this.render();
    if (!this.settings.node.hidden) {
      void this.settings.show(this.hub);
    }
  }

  /** Show the Settings view instead of the conversation, or go back (the picker then asks for the new choices). */
  async toggleSettings(): Promise<void> {
    const opening = this.settings.node.hidden;
    this.settings.node.hidden = !opening;
    this.chat.hidden = opening;
    this.settingsButton.textContent = opening ? 'Back to the chat' : 'Settings';
    if (opening) {
      await this.settings.show(this.hub);
    } else if (this.hub && this.hub.state === 'ready') {
      await this.hub.refresh();
    }
  }

  /** Show (or hide) this notebook's conversations. */
  private async toggleList(): Promise<void> {
    const hub = this.hub;
    if (this.listEl.childElementCount) {
      this.listEl.textContent = '';
      return;
    }
    if (!hub) {
      this.box.showError('Open a notebook first: the panel works on the current notebook.');
      return;
    }
    this.listButton.disabled = true;
    try {
      const result = await hub.conversations();
      this.listEl.textContent = '';
      this.listEl.append(conversationList(result, hub.picked?.id ?? null, id => {
        hub.open(id).then(() => {
          this.listEl.textContent = '';
          this.box.focus();
        }, err => this.box.showError(err instanceof Error ? err.message : String(err)));
      }));
    } catch (err) {
      this.box.showError(err instanceof Error ? err.message : String(err));
    } finally {
      this.listButton.disabled = false;
    }
  }

  /** "Ask nbagent" on a cell: the next prompt is about it. */
  askAbout(cell: Cell): void {
    if (!this.settings.node.hidden) {
      void this.toggleSettings();
    }
    this.box.about = cell;
    this.render();
    this.box.focus();
  }

  /** Scroll to a run's card (and flash it), e.g. from a cell's badge. */
  showRun(runId: string): void {
    this.runs.show(this.hub, runId);
  }

  async startOn(cell: Cell, kind: 'fix' | 'explain'): Promise<void> {
    await this.box.run('', kind, cell);
  }

  private host(hub: PanelHub, nb: NotebookPanel): Host {
    return { hub, nb, error: text => this.box.showError(text), redraw: () => this.render() };
  }

  protected onAfterShow(): void {
    this.render();
  }

  /** A hidden panel draws no live views (each is a second view of the run's widgets): they come back on show. */
  protected onAfterHide(): void {
    this.runs.hide(this.hub);
  }

  private render(): void {
    const hub = this.hub;
    const nb = this.notebook;
    if (!this.settings.node.hidden && !this.settings.drawn && !this.settings.asking && hub?.state === 'ready') {
      void this.settings.show(hub); // the kernel answered (or nbagent was loaded) after Settings opened
    }
    this.pathEl.textContent = nb ? nb.context.path : 'no notebook open';
    this.statusEl.textContent = '';
    this.convEl.textContent = '';
    this.storedEl.textContent = '';
    this.box.clear();
    if (!hub || !nb) {
      this.statusEl.append(el('div', 'nba-panel-note', 'Open a notebook: the panel shows its conversation with nbagent.'));
      return;
    }
    const shown = hub.shownRuns();
    const storedShown = !hub.fresh && !hub.picked && !!hub.stored && !shown.some(r => !r.before_restart);
    if (hub.restarted) {
      this.statusEl.append(el('div', 'nba-panel-restarted', storedShown && hub.runs.size === 0
        ? 'The kernel restarted: its variables and the runs that were going are gone. Below is the stored ' +
          'conversation; the next prompt continues it.'
        : 'The kernel restarted: its variables and the runs that were going are gone. What the panel showed ' +
          'is kept below.'));
    }
    if (hub.state === 'connecting') {
      this.statusEl.append(el('div', 'nba-panel-note', 'Connecting to the kernel…'));
    } else if (hub.state !== 'ready') {
      const note = el('div', 'nba-panel-absent', hub.absentText());
      this.statusEl.append(note);
      if (hub.state === 'absent') {
        const load = el('button', 'jp-Button nba-panel-load', 'Load nbagent') as HTMLButtonElement;
        load.onclick = () => {
          load.disabled = true;
          hub.loadExtension().catch(err => this.box.showError(err instanceof Error ? err.message : String(err)));
        };
        this.statusEl.append(load);
      }
    }
    conversationChips(this.convEl, hub);
    this.runs.render(hub, nb);
    conversationReview(this.box.review, shown, this.host(hub, nb));
    if (hub.picked) {
      storedConversation(this.storedEl, hub.picked, 'picked');
    } else if (storedShown) {
      storedConversation(this.storedEl, hub.stored!, 'latest');
    } else if (hub.fresh && !shown.length) {
      this.storedEl.append(el('div', 'nba-panel-note nba-panel-fresh', 'New chat: your next prompt starts a new conversation.'));
    }
    this.box.draw(hub, nb);
  }
}
