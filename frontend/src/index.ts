/**
 * nbagent's frontend part for JupyterLab 4 and Notebook 7, in two rooms that mirror the kernel's:
 *
 *   notebook/  the `nbagent.notebook` comm: the kernel reads and edits the live notebook, runs its cells, and
 *              keeps its runs' renderings (kernel side: nbagent/jupyter/notebook/)
 *   panel/     the `nbagent.panel` comm: the side panel, the buttons on errors and cells, the reviews of the
 *              agent's edits in the cells, and the decisions of the live views (kernel side: nbagent/jupyter/panel/)
 *
 * and codeblocks.ts, which both use: Copy and Insert as cell on the model's code blocks. Each comm's messages
 * are written once, as a JSON Schema in the room's kernel side (protocol.json), from which its protocol.ts is
 * generated (`npm run protocol`).
 */
import { notebookPlugin } from './notebook/plugin';
import { panelPlugin } from './panel/plugin';

export default [notebookPlugin, panelPlugin];
