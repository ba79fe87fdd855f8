/**
 * The `nbagent:panel` plugin: the side panel (right, ./sidebar.ts), a hub per notebook (./panelComm.ts: the page's
 * end of its `nbagent.panel` comm), the decorations in its cells (./review.ts), the live views' decisions sent
 * through that comm (./decisions.ts), the "Ask nbagent" toolbar button, Copy and Insert as cell on the model's
 * code blocks in the panel, "Make cells" on a finished run's names that exist only in the kernel (./tocells.ts),
 * and the commands (palette and keyboard):
 *
 *   nbagent:open-panel     show the panel
 *   nbagent:ask-cell       Accel+Alt+A: ask about the selected cell (the prompt box gets it as context)
 *   nbagent:fix-cell       "Fix with nbagent" on the selected cell's error
 *   nbagent:explain-cell   "Explain" the selected cell's error
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ToolbarButton } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { watchCodeBlocks } from '../codeblocks';
import { routeDecisions } from './decisions';
import { PanelHub, hasError } from './panelComm';
import { CellDecorator } from './review';
import { watchKernelOnly } from './tocells';
import { AgentPanel } from './sidebar';

const ICON = new LabIcon({
  name: 'nbagent:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><g class="jp-icon3" fill="#616161">' +
    '<path d="M4 4h16v12H8l-4 4z" fill-opacity="0.25"/><path d="M4 4h16v12H8l-4 4zm2 2v9.2L7.2 14H18V6z"/>' +
    '<circle cx="9" cy="10" r="1.3"/><circle cx="12" cy="10" r="1.3"/><circle cx="15" cy="10" r="1.3"/></g></svg>'
});

export const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: 'nbagent:panel',
  description: 'The nbagent side panel, Fix / Explain on errors, Ask on a cell, and the agent\'s changes reviewed in the cells.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    const hubs = new WeakMap<NotebookPanel, PanelHub>();
    const hubOf = (nb: NotebookPanel): PanelHub => {
      let hub = hubs.get(nb);
      if (!hub) {
        hub = new PanelHub(nb);
        hubs.set(nb, hub);
        const decorator = new CellDecorator(nb, hub, {
          fix: cell => void start(nb, cell, 'fix'),
          explain: cell => void start(nb, cell, 'explain'),
          showRun: run => {
            openPanel();
            panel.showRun(run);
          }
        });
        nb.disposed.connect(() => {
          decorator.dispose();
          hub!.dispose();
        });
      }
      return hub;
    };
    const panel = new AgentPanel(hubOf);
    panel.title.icon = ICON;
    app.shell.add(panel, 'right', { rank: 650 });
    // the model's code blocks in the panel: Insert puts the cell below the notebook's active cell
    watchCodeBlocks(panel.node, () => {
      const nb = panel.notebookPanel;
      return nb && !nb.isDisposed ? { notebook: nb, index: nb.content.activeCellIndex } : null;
    });
    // Approve, Deny, Always allow and Stop in a live view (a cell's or the panel's): through the notebook's hub
    routeDecisions(view => {
      const nb = panel.node.contains(view) ? panel.notebookPanel : tracker.find(p => p.node.contains(view));
      return nb && !nb.isDisposed ? hubOf(nb) : null;
    });
    const openPanel = () => {
      app.shell.activateById(panel.id);
    };
    const start = async (nb: NotebookPanel, cell: Cell, kind: 'fix' | 'explain') => {
      panel.follow(nb);
      openPanel();
      await panel.startOn(cell, kind);
    };
    tracker.widgetAdded.connect((_t, nb) => {
      const hub = hubOf(nb);
      // "Make cells" on a finished run's line of names that exist only in the kernel, in its cell's view
      const stop = watchKernelOnly(nb.content.node, run => hub.toCells(run).then(result => {
        if (!result.run) {
          return result.summary.split('\n')[0] || 'No cell is needed';
        }
        openPanel();
        window.setTimeout(() => panel.showRun(result.run!.id), 100);
        return 'Proposed below: review each cell';
      }));
      nb.disposed.connect(stop);
      const ask = new ToolbarButton({
        icon: ICON,
        label: 'Ask nbagent',
        className: 'nba-toolbar-ask',
        tooltip: 'Ask nbagent about the selected cell (Ctrl+Alt+A)',
        onClick: () => void app.commands.execute('nbagent:ask-cell')
      });
      nb.toolbar.insertItem(10, 'nbagentAsk', ask);
    });
    tracker.currentChanged.connect((_t, nb) => panel.follow(nb));
    panel.follow(tracker.currentWidget);

    const current = (): { nb: NotebookPanel; cell: Cell } | null => {
      const nb = tracker.currentWidget;
      const cell = nb?.content.activeCell;
      return nb && cell ? { nb, cell } : null;
    };
    app.commands.addCommand('nbagent:open-panel', {
      label: 'nbagent: Show the panel',
      execute: () => openPanel()
    });
    app.commands.addCommand('nbagent:ask-cell', {
      label: 'nbagent: Ask about the selected cell',
      isEnabled: () => current() !== null,
      execute: () => {
        const found = current();
        if (found) {
          panel.follow(found.nb);
          openPanel();
          panel.askAbout(found.cell);
        }
      }
    });
    app.commands.addCommand('nbagent:fix-cell', {
      label: 'nbagent: Fix the error in the selected cell',
      isEnabled: () => { const f = current(); return f !== null && hasError(f.cell); },
      execute: () => { const f = current(); return f ? start(f.nb, f.cell, 'fix') : undefined; }
    });
    app.commands.addCommand('nbagent:explain-cell', {
      label: 'nbagent: Explain the error in the selected cell',
      isEnabled: () => { const f = current(); return f !== null && hasError(f.cell); },
      execute: () => { const f = current(); return f ? start(f.nb, f.cell, 'explain') : undefined; }
    });
    app.commands.addKeyBinding({ command: 'nbagent:ask-cell', keys: ['Accel Alt A'], selector: '.jp-Notebook' });
    if (palette) {
      for (const command of ['nbagent:open-panel', 'nbagent:ask-cell', 'nbagent:fix-cell', 'nbagent:explain-cell']) {
        palette.addItem({ command, category: 'nbagent' });
      }
    }
  }
};
