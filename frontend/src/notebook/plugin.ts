/**
 * The `nbagent:notebook` plugin: the kernel reads and edits the live notebook and runs its cells over the
 * `nbagent.notebook` comm (./notebookComm.ts). It also keeps each run's static rendering for when the kernel goes
 * first (./keptViews.ts), makes links to `#nbagent-cell=<id>` scroll to that cell, and gives the model's code
 * blocks in the outputs Copy and Insert as cell buttons (../codeblocks.ts).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

import { belowItsCell, watchCodeBlocks } from '../codeblocks';
import { NotebookComm, TARGET } from './notebookComm';
import { followRuns } from './keptViews';

/** Scroll to the cell a `#nbagent-cell=<id>` link names, in the notebook the link is in. */
function onLinkClick(tracker: INotebookTracker, event: MouseEvent): void {
  const target = event.target as HTMLElement | null;
  const link = target?.closest?.('a[href^="#nbagent-cell="]') as HTMLAnchorElement | null;
  if (!link) {
    return;
  }
  event.preventDefault();
  event.stopPropagation();
  const id = decodeURIComponent(link.getAttribute('href')!.slice('#nbagent-cell='.length));
  const host = link.closest('.jp-NotebookPanel');
  const panel = tracker.find(p => p.node === host) ?? tracker.currentWidget;
  if (!panel) {
    return;
  }
  const notebook = panel.content;
  const index = notebook.widgets.findIndex(w => w.model.id === id);
  if (index < 0) {
    return;
  }
  notebook.activeCellIndex = index;
  notebook.mode = 'command';
  void notebook.scrollToCell(notebook.widgets[index], 'center').catch(() => undefined);
}

export const notebookPlugin: JupyterFrontEndPlugin<void> = {
  id: 'nbagent:notebook',
  description: 'Lets nbagent, in the kernel, read and edit the live notebook and run its cells.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    /** Which panels show which kernel connection (two views of one notebook share one). */
    const panelsByKernel = new WeakMap<Kernel.IKernelConnection, Set<NotebookPanel>>();
    const comms = new WeakMap<Kernel.IKernelConnection, Set<NotebookComm>>();

    const attach = (panel: NotebookPanel, kernel: Kernel.IKernelConnection) => {
      let panels = panelsByKernel.get(kernel);
      if (!panels) {
        const mine = new Set<NotebookPanel>();
        panels = mine;
        panelsByKernel.set(kernel, mine);
        kernel.registerCommTarget(TARGET, comm => {
          const answerer = new NotebookComm(comm, () => [...mine], tracker);
          let set = comms.get(kernel);
          if (!set) {
            set = new Set();
            comms.set(kernel, set);
          }
          const open = set;
          open.add(answerer);
          comm.onClose = () => {
            open.delete(answerer);
          };
          // the kernel's hello follows as the comm's first message
        });
      }
      panels.add(panel);
    };

    const detach = (panel: NotebookPanel, kernel: Kernel.IKernelConnection) => {
      const panels = panelsByKernel.get(kernel);
      panels?.delete(panel);
      if (panels && [...panels].every(p => p.isDisposed)) {
        // the notebook went away: tell the kernel at once rather than let it wait
        for (const answerer of comms.get(kernel) ?? []) {
          answerer.close();
        }
        comms.delete(kernel);
      }
    };

    const kernelOf = new WeakMap<NotebookPanel, Kernel.IKernelConnection>();
    const follow = (panel: NotebookPanel, kernel: Kernel.IKernelConnection | null | undefined) => {
      const before = kernelOf.get(panel);
      if (before) {
        detach(panel, before);
      }
      kernelOf.delete(panel);
      if (kernel) {
        kernelOf.set(panel, kernel);
        attach(panel, kernel);
      }
    };
    tracker.widgetAdded.connect((_sender, panel) => {
      followRuns(panel);
      // Copy, Insert as cell: on the blocks that carry the mark this notebook's live kernel said in its hello
      const stopWatching = watchCodeBlocks(panel.content.node, belowItsCell(panel), panel);
      panel.disposed.connect(() => stopWatching());
      const session = panel.sessionContext;
      follow(panel, session.session?.kernel);
      session.kernelChanged.connect((_s, change) => follow(panel, change.newValue));
      panel.disposed.connect(() => follow(panel, null));
    });

    document.addEventListener('click', event => onLinkClick(tracker, event), true);
  }
};
