/**
 * The `nbagent.notebook` comm's messages, generated from nbagent/jupyter/notebook/protocol.json by
 * `npm run protocol`: edit the schema, not this file (a test fails when they differ).
 */

/**
 * What the kernel asks (kernel -> page).
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "KernelRequest".
 */
export type KernelRequest =
  HelloRequest | SnapshotRequest | ReadRequest | InsertRequest | EditRequest | DeleteRequest | RunRequest;
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "RequestId".
 */
export type RequestId = number;
/**
 * The page that answered the hello: a request naming another page is not for this one.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "ClientId".
 */
export type ClientId = string;
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "CellType".
 */
export type CellType = 'code' | 'markdown' | 'raw';
/**
 * The page's answer to one request (page -> kernel): its result, or why it refused.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "PageReply".
 */
export type PageReply =
  | {
      id: RequestId;
      ok: true;
      result: Result;
    }
  | {
      id: RequestId;
      ok: false;
      error: string;
    };
/**
 * What a reply may hold (`Results` says which, by op).
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "Result".
 */
export type Result = HelloResult | SnapshotResult | ReadResult | InsertResult | EditResult | RunResult;

/**
 * The `nbagent.notebook` comm: the kernel opens it (comm_open data {"protocol": 1}) and asks the page for the live notebook, to apply edits and to run cells; the page answers each request once. Every request after the hello names the page chosen to answer (`client`). Kernel side: nbagent/jupyter/notebook/comm.py (and cells.py, tools.py, snapshots.py, which ask); page side: frontend/src/notebook/notebookComm.ts, whose types are generated from this file (`npm run protocol`).
 */
export interface NotebookProtocol {
  [k: string]: unknown;
}
/**
 * Every page showing this kernel's notebook answers; the kernel keeps the first.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "HelloRequest".
 */
export interface HelloRequest {
  id: RequestId;
  op: 'hello';
  protocol: 1;
  /**
   * The class this kernel's code blocks carry (nbagent.render.markdown.LIVE_MARK): the page gives Copy and Insert as cell only to blocks that carry it.
   */
  mark?: string;
}
/**
 * Keep (html null: drop) the static rendering of the live view whose widget is `model_id`, for when the kernel goes first (frontend/src/notebook/keptViews.ts).
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "SnapshotRequest".
 */
export interface SnapshotRequest {
  id: RequestId;
  op: 'snapshot';
  client: ClientId;
  model_id: string;
  html: string | null;
  text?: string | null;
}
/**
 * Every cell of the live notebook (unsaved edits included), outputs trimmed.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "ReadRequest".
 */
export interface ReadRequest {
  id: RequestId;
  op: 'read';
  client: ClientId;
}
/**
 * A new cell after the cell `after` (null: at the end), marked as the agent's.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "InsertRequest".
 */
export interface InsertRequest {
  id: RequestId;
  op: 'insert';
  client: ClientId;
  source: string;
  cell_type: CellType;
  after?: string | null;
  mark?: CellMark | null;
}
/**
 * The `nbagent` entry of a cell's metadata: which run and call of the agent made it, and how.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "CellMark".
 */
export interface CellMark {
  run?: string | null;
  call?: string | null;
  /**
   * inserted, edited, python (python_in_cells), or recreated (%agent --to-cells: the code of a run's call).
   */
  action: string;
  /**
   * The model of the run the cell came from.
   */
  model?: string | null;
  /**
   * recreated: the calls whose code the cell holds.
   */
  calls?: string[];
  /**
   * recreated: the tool that ran that code.
   */
  tool?: string;
  /**
   * recreated: which cell of the run's cells this is (1-based).
   */
  step?: number;
  /**
   * recreated: how many cells the run's final state needs.
   */
  steps?: number;
  /**
   * recreated: the names the code made or changed.
   */
  makes?: string[];
  /**
   * recreated: the run and call of `%agent --to-cells` that inserted it.
   */
  inserted_by?: {
    run?: string | null;
    call?: string | null;
  };
}
/**
 * Replace the one occurrence of `old` in the cell with `new`, only while the cell holds `expected`.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "EditRequest".
 */
export interface EditRequest {
  id: RequestId;
  op: 'edit';
  client: ClientId;
  cell_id: string;
  old: string;
  new: string;
  expected?: string | null;
  mark?: CellMark | null;
}
/**
 * Delete the cell, only while it holds `expected`.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "DeleteRequest".
 */
export interface DeleteRequest {
  id: RequestId;
  op: 'delete';
  client: ClientId;
  cell_id: string;
  expected?: string | null;
}
/**
 * Run the cell through the notebook (its output lands where the person sees it), only while it holds `expected`: the code that was approved, and nothing else.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "RunRequest".
 */
export interface RunRequest {
  id: RequestId;
  op: 'run';
  client: ClientId;
  cell_id: string;
  expected?: string | null;
}
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "HelloResult".
 */
export interface HelloResult {
  client: ClientId;
  /**
   * The notebook's path, relative to the server's root.
   */
  path: string;
  /**
   * "lab" or "notebook" (Notebook 7).
   */
  app: string;
  /**
   * The notebook's own id (its metadata's nbagent.id): it follows the notebook through renames.
   */
  notebook_id: string;
}
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "SnapshotResult".
 */
export interface SnapshotResult {
  kept: boolean;
}
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "ReadResult".
 */
export interface ReadResult {
  path: string;
  /**
   * The notebook has changes not saved yet.
   */
  dirty?: boolean;
  cells: Cell[];
}
/**
 * A cell as the page reads it: code cells with their execution count and outputs (trimmed: long text keeps both ends, images are only named).
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "Cell".
 */
export interface Cell {
  id: string;
  index: number;
  cell_type: string;
  source: string;
  /**
   * The cell's `nbagent` metadata as it is (usually a CellMark; a saved notebook may hold anything there).
   */
  nbagent: {
    [k: string]: unknown;
  } | null;
  execution_count?: number | null;
  outputs?: Output[];
}
/**
 * An nbformat output as the kernel reads it (trimmed by the page).
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "Output".
 */
export interface Output {
  output_type: string;
  name?: string;
  text?: string;
  data?: {
    [k: string]: unknown;
  };
  metadata?: {
    [k: string]: unknown;
  };
  execution_count?: number | null;
  ename?: string;
  evalue?: string;
  traceback?: string[];
  truncated?: boolean;
}
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "InsertResult".
 */
export interface InsertResult {
  cell_id: string;
  index: number;
  /**
   * How many cells the notebook has now.
   */
  count: number;
}
/**
 * An edit's or a deletion's result: the cell's source after the edit, or what the deleted cell held.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "EditResult".
 */
export interface EditResult {
  cell_id: string;
  index: number;
  source: string;
}
/**
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "RunResult".
 */
export interface RunResult {
  cell: Cell;
  /**
   * The execute reply's status: ok, error or aborted.
   */
  status: string;
}
/**
 * What the reply to each request holds, by op.
 *
 * This interface was referenced by `NotebookProtocol`'s JSON-Schema
 * via the `definition` "Results".
 */
export interface Results {
  hello: HelloResult;
  snapshot: SnapshotResult;
  read: ReadResult;
  insert: InsertResult;
  edit: EditResult;
  delete: EditResult;
  run: RunResult;
}
