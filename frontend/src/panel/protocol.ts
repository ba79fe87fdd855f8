/**
 * The `nbagent.panel` comm's messages, generated from nbagent/jupyter/panel/protocol.json by
 * `npm run protocol`: edit the schema, not this file (a test fails when they differ).
 */

/**
 * What the page may ask (page -> kernel). Anything else is refused, with why.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "PageRequest".
 */
export type PageRequest =
  | StateRequest
  | StartRequest
  | DecideRequest
  | StopRequest
  | UndoneRequest
  | BatchDecideRequest
  | TrustRequest
  | SteerRequest
  | ToCellsRequest
  | SettingsRequest
  | SetKeyRequest
  | RemoveKeyRequest
  | SetBaseUrlRequest
  | SetOptionRequest
  | ConversationsRequest
  | OpenRequest;
/**
 * Chosen by the page; the reply carries it back.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "RequestId".
 */
export type RequestId = number;
/**
 * A prompt typed in the panel, or one of the buttons on a cell: Ask, Fix with nbagent, Explain; "plan": propose a plan for the prompt first (plan mode: nothing changes); "follow": the prompt is the plan the person approved (edited or not), to carry out step by step.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StartKind".
 */
export type StartKind = 'prompt' | 'ask' | 'fix' | 'explain' | 'plan' | 'follow';
/**
 * An id, a model's name, a digest.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ShortText".
 */
export type ShortText = string;
/**
 * Approve once, deny (the reason is told to the model), or approve and allow the like for the session.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Choice".
 */
export type Choice = 'approve' | 'deny' | 'always';
/**
 * What the kernel sends (kernel -> page): the answer to one request, or news of a run.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "KernelMessage".
 */
export type KernelMessage = Reply | RunEvent;
/**
 * The answer to one request: its result, or why it was refused (`id` null: the request had no usable id).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Reply".
 */
export type Reply =
  | {
      id: RequestId | null;
      ok: true;
      result: Result;
    }
  | {
      id: RequestId | null;
      ok: false;
      error: string;
    };
/**
 * What a reply may hold (`Results` says which, by op).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Result".
 */
export type Result =
  | StateResult
  | RunSummary
  | DecideResult
  | StopResult
  | UndoneResult
  | SteerResult
  | ToCellsResult
  | SettingsResult
  | ConversationsResult
  | StoredConversation;

/**
 * The `nbagent.panel` comm: the page opens it (comm_open data {"protocol": 1}) and asks; the kernel answers each request once and pushes a run's summary whenever the run moved on. The kernel validates every request against `PageRequest` (nbagent/jupyter/panel/hub.py); the page's types are generated from this file (frontend/src/panel/protocol.ts, `npm run protocol`).
 */
export interface PanelProtocol {
  [k: string]: unknown;
}
/**
 * The conversation: the runs of this kernel, the stored conversation when none ran yet, the settings.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StateRequest".
 */
export interface StateRequest {
  id: RequestId;
  op: 'state';
}
/**
 * Start a run in the notebook's kernel, as %agent does. `kind` other than "prompt" needs the cell it is about.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StartRequest".
 */
export interface StartRequest {
  id: RequestId;
  op: 'start';
  prompt: string;
  kind?: StartKind;
  cell?: CellPayload | null;
  model?: ShortText | null;
  new?: boolean;
  resume?: ShortText | null;
  /**
   * The cells the prompt mentions as @[n] (each the cell shown as In [n]): their sources go with the words, as data.
   *
   * @maxItems 12
   */
  cells?:
    | []
    | [CellPayload]
    | [CellPayload, CellPayload]
    | [CellPayload, CellPayload, CellPayload]
    | [CellPayload, CellPayload, CellPayload, CellPayload]
    | [CellPayload, CellPayload, CellPayload, CellPayload, CellPayload]
    | [CellPayload, CellPayload, CellPayload, CellPayload, CellPayload, CellPayload]
    | [CellPayload, CellPayload, CellPayload, CellPayload, CellPayload, CellPayload, CellPayload]
    | [CellPayload, CellPayload, CellPayload, CellPayload, CellPayload, CellPayload, CellPayload, CellPayload]
    | [
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload
      ]
    | [
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload
      ]
    | [
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload
      ]
    | [
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload,
        CellPayload
      ];
}
/**
 * What the kernel is told of a cell for Fix, Explain and Ask: its id, source and error outputs, and where the person sees it (its In [n], its place), which name it in the person's words.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "CellPayload".
 */
export interface CellPayload {
  id: ShortText;
  source?: string;
  /**
   * @maxItems 100
   */
  outputs?: CellPayloadOutput[];
  /**
   * Its In [n] as the page shows it (null: not run).
   */
  execution_count?: number | null;
  /**
   * Its place in the notebook (0: the first cell).
   */
  index?: number;
  cell_type?: 'code' | 'markdown' | 'raw';
}
/**
 * An error (its name, value and the end of its traceback) or a stream's last text.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "CellPayloadOutput".
 */
export interface CellPayloadOutput {
  output_type: string;
  ename?: string;
  evalue?: string;
  traceback?: string[];
  name?: string;
  text?: string;
}
/**
 * Decide the call waiting for approval: taken only while that call waits and only with the digest of the exact arguments shown (one decision, whichever path is first).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "DecideRequest".
 */
export interface DecideRequest {
  id: RequestId;
  op: 'decide';
  run: ShortText;
  call: ShortText;
  digest: ShortText;
  choice: Choice;
  reason?: string;
}
/**
 * Stop a run (as its Stop button, or run.cancel()).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StopRequest".
 */
export interface StopRequest {
  id: RequestId;
  op: 'stop';
  run: ShortText;
}
/**
 * The page undid a change of this call in the notebook.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "UndoneRequest".
 */
export interface UndoneRequest {
  id: RequestId;
  op: 'undone';
  run: ShortText;
  call: ShortText;
}
/**
 * Decide a call of a batch's item waiting in the batch view (`%agent --map`): taken only while that call waits and only with the digest of the exact arguments shown; `always` approves it and grants what its button says.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "BatchDecideRequest".
 */
export interface BatchDecideRequest {
  id: RequestId;
  op: 'batch_decide';
  batch: ShortText;
  call: ShortText;
  digest: ShortText;
  choice: Choice;
  reason?: string;
}
/**
 * Answer the MCP trust prompt that showed the workspace configuration with this digest: trust exactly it, or not now. Taken only for that digest, once.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "TrustRequest".
 */
export interface TrustRequest {
  id: RequestId;
  op: 'trust';
  digest: ShortText;
  choice: 'trust' | 'later';
}
/**
 * Send the person's message into the run the view showing it belongs to (the view's steering box); it joins at the run's next turn.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SteerRequest".
 */
export interface SteerRequest {
  id: RequestId;
  op: 'steer';
  run: ShortText;
  text: string;
}
/**
 * Propose, below a finished run's cell, the cells that make again what its code left in the kernel (what %agent --to-cells does): a run of its own inserts each as a change to review; nothing runs.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ToCellsRequest".
 */
export interface ToCellsRequest {
  id: RequestId;
  op: 'to_cells';
  run: ShortText;
}
/**
 * The Settings page: providers (where each one's key and base URL come from; never a key), the model and every %config NBAgent choice.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SettingsRequest".
 */
export interface SettingsRequest {
  id: RequestId;
  op: 'settings';
}
/**
 * Store a provider's API key in the person's key file (outside every notebook and workspace, 0600). Sent once from a password field; the answer says only where it is stored and its last four characters.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SetKeyRequest".
 */
export interface SetKeyRequest {
  id: RequestId;
  op: 'set_key';
  provider: ShortText;
  key: string;
}
/**
 * Forget a provider's stored key (a key in the environment stays: it is the environment's).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "RemoveKeyRequest".
 */
export interface RemoveKeyRequest {
  id: RequestId;
  op: 'remove_key';
  provider: ShortText;
}
/**
 * Store where a provider's requests go (a local OpenAI-compatible server: http://localhost:8000/v1); null forgets the stored one.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SetBaseUrlRequest".
 */
export interface SetBaseUrlRequest {
  id: RequestId;
  op: 'set_base_url';
  provider: ShortText;
  base_url: string | null;
}
/**
 * What %config NBAgent.<name> = <value> does, for this kernel (refused with the setting's own words when the value does not fit).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SetOptionRequest".
 */
export interface SetOptionRequest {
  id: RequestId;
  op: 'set_option';
  name: ShortText;
  value: string | number | boolean | null;
}
/**
 * This notebook's stored conversations, newest first (to pick one to continue).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ConversationsRequest".
 */
export interface ConversationsRequest {
  id: RequestId;
  op: 'conversations';
}
/**
 * One of this notebook's stored conversations, to show before the next prompt continues it (start with `resume` set to it). Refused for a conversation the session store does not verify.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "OpenRequest".
 */
export interface OpenRequest {
  id: RequestId;
  op: 'open';
  session: ShortText;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StateResult".
 */
export interface StateResult {
  runs: RunSummary[];
  stored: StoredConversation | null;
  session_id: string | null;
  /**
   * Who this kernel is: another value means it restarted.
   */
  kernel: string | null;
  conversation: string | null;
  config: Settings;
  /**
   * The class this kernel's code blocks carry (nbagent.render.markdown.LIVE_MARK): the page gives Copy and Insert as cell only to a notebook's blocks that carry it.
   */
  mark?: string;
}
/**
 * A run as the panel shows it (nbagent/jupyter/panel/model.py run_summary).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "RunSummary".
 */
export interface RunSummary {
  id: string;
  status: string;
  label: string;
  source: 'panel' | 'cell';
  kind: string;
  /**
   * The id of the cell a Fix, Explain or Ask was about.
   */
  cell: string | null;
  head: RunHead;
  /**
   * The live view's widget model id while the run goes on.
   */
  widget: string | null;
  /**
   * The static rendering once the run ended (the page sanitizes it).
   */
  html: string | null;
  reviews: Review[];
  changes: Change[];
  /**
   * Once the run ended: the names its code made or changed that no cell of the notebook defines (to_cells proposes the cells that make them).
   */
  kernel_only: string[];
  /**
   * A plan-first run that ended: the plan it proposed, for the person to edit and approve.
   */
  plan?: string | null;
  /**
   * A run carrying out an approved plan: the step it says it is on (null: none declared yet).
   */
  step?: PlanStep | null;
}
/**
 * The run's model, mode and tools, its cost and how full its context window is (text, with a title each).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "RunHead".
 */
export interface RunHead {
  model: string;
  mode: string;
  tools: string;
  tools_title: string;
  cost: string;
  cost_title: string;
  context: string;
  context_title: string;
  fraction: number | null;
}
/**
 * A call waiting for a decision: `digest` binds a decision to this call with exactly these arguments; notebook edits carry their whole proposal.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Review".
 */
export interface Review {
  call: string;
  tool: string;
  digest: string;
  arguments?: {
    [k: string]: string | null;
  };
  /**
   * An edit or deletion: what the agent last read of the cell, on which the change is based (the notebook applies it only while the cell holds exactly this; null: nothing read).
   */
  expected?: string | null;
}
/**
 * A cell the run inserted, edited or deleted: what it held before (null: cannot be told for sure) and after.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Change".
 */
export interface Change {
  call: string;
  action: 'inserted' | 'edited' | 'deleted';
  cell_id: string;
  /**
   * The cell as the person saw it when it changed ([8] by_region = ...).
   */
  name: string;
  index: number;
  cell_type: string;
  before: string | null;
  after: string;
  undone: boolean;
}
/**
 * The last "Step N of M" the model wrote in the run (its own word, not a measure): `text` is the approved plan's step N (else the model's words), `planned` how many steps the approved plan has.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "PlanStep".
 */
export interface PlanStep {
  n: number;
  of: number;
  text: string;
  planned: number;
}
/**
 * The notebook's latest stored conversation (text only), or why it could not be read.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StoredConversation".
 */
export interface StoredConversation {
  id: string | null;
  runs?: number;
  turns?: number;
  model?: string | null;
  updated?: string | number | null;
  error?: string;
  messages: StoredMessage[];
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StoredMessage".
 */
export interface StoredMessage {
  role: 'you' | 'nbagent';
  /**
   * What was said: the person's own words, not the context a button added.
   */
  text: string;
  /**
   * What the model was sent with the person's words (shown folded).
   */
  context?: string;
}
/**
 * The kernel's settings the panel shows before a run says its own (%config NBAgent).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Settings".
 */
export interface Settings {
  model: string | null;
  mode: string;
  /**
   * The models the picker offers: those defined in the kernel, then the priced models of each provider whose key is set.
   *
   * @maxItems 300
   */
  models?: ModelChoice[];
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ModelChoice".
 */
export interface ModelChoice {
  /**
   * What the run is started with (as %agent --model takes it).
   */
  spec: string;
  label: string;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "DecideResult".
 */
export interface DecideResult {
  /**
   * False: the call was decided already (by another path).
   */
  taken: boolean;
  why?: string;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "StopResult".
 */
export interface StopResult {
  stopped: boolean;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "UndoneResult".
 */
export interface UndoneResult {
  ok: true;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SteerResult".
 */
export interface SteerResult {
  /**
   * False: the run is over; nothing was sent.
   */
  sent: boolean;
  /**
   * What the view's box now says (plain text).
   */
  note: string;
}
/**
 * The run that proposes the cells (null when none is needed), and in words what they make and what is left out.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ToCellsResult".
 */
export interface ToCellsResult {
  run: RunSummary | null;
  summary: string;
}
/**
 * What the Settings page shows. A key is never in it: only where it comes from and, when it is long enough, its last four characters.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "SettingsResult".
 */
export interface SettingsResult {
  providers: ProviderSettings[];
  options: OptionSetting[];
  /**
   * The key file.
   */
  file: string;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ProviderSettings".
 */
export interface ProviderSettings {
  /**
   * The spec prefix (openai, ollama...).
   */
  id: string;
  label: string;
  /**
   * The environment variable the key is read from (and stored under).
   */
  key_variable: string | null;
  key: {
    source: 'environment' | 'stored' | null;
    ends: string | null;
    /**
     * False: the provider works without a key (a local server).
     */
    required: boolean;
  };
  base_url: {
    variable: string | null;
    value: string | null;
    source: 'environment' | 'stored' | null;
    default: string;
  };
  /**
   * The models the price table knows there.
   */
  models: string[];
}
/**
 * One %config NBAgent setting; `other` kinds (lists, dicts, objects) are set with %config in a cell.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "OptionSetting".
 */
export interface OptionSetting {
  name: string;
  help: string;
  kind: 'choice' | 'bool' | 'int' | 'float' | 'text' | 'other';
  value: string | number | boolean | null;
  choices?: string[];
  nullable: boolean;
}
/**
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ConversationsResult".
 */
export interface ConversationsResult {
  conversations: ConversationItem[];
  /**
   * The conversation the box continues (null: the next prompt starts one).
   */
  current: string | null;
  /**
   * Older conversations left out (%agent --sessions lists them).
   */
  more: number;
}
/**
 * A stored conversation of this notebook as the list shows it.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "ConversationItem".
 */
export interface ConversationItem {
  id: string;
  /**
   * The words the person started it with (one line).
   */
  first: string;
  /**
   * When it was last written (seconds since 1970).
   */
  updated: number;
  runs: number;
  calls: number;
  model: string | null;
  /**
   * A Fix or Explain side thread.
   */
  side: boolean;
  /**
   * False: the session store does not verify it (unsigned, or changed by something other than nbagent); it is listed, not continued.
   */
  resumable: boolean;
  /**
   * Why it cannot be continued.
   */
  why?: string;
}
/**
 * A run moved on (pushed, at most a few times a second).
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "RunEvent".
 */
export interface RunEvent {
  event: 'run';
  run: RunSummary;
}
/**
 * What the reply to each request holds, by op.
 *
 * This interface was referenced by `PanelProtocol`'s JSON-Schema
 * via the `definition` "Results".
 */
export interface Results {
  state: StateResult;
  start: RunSummary;
  decide: DecideResult;
  stop: StopResult;
  undone: UndoneResult;
  batch_decide: DecideResult;
  trust: DecideResult;
  steer: SteerResult;
  to_cells: ToCellsResult;
  settings: SettingsResult;
  set_key: SettingsResult;
  remove_key: SettingsResult;
  set_base_url: SettingsResult;
  set_option: SettingsResult;
  conversations: ConversationsResult;
  open: StoredConversation;
}
