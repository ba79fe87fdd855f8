"""One agent over many inputs: `Agent.map(...)` returns a `BatchRun`.

    run            `BatchRun`: items run with bounded concurrency, limits held for the whole batch, retries
    items          one item's result (`ItemResult`), prompts filled from items, what is worth retrying
    store          a stored batch (signed lines), so `resume=` does not ask again for items done
    dask           the engine on a Dask cluster (`engine=client`): runner tasks, the agent shipped
    dask_permits   the client's side of its permits: each carries the time its request may go
    dask_keys      a key given in code, sealed to each runner (never in a pickle)
    dask_worker    the worker's side of it (imported on the cluster's workers)

The rule: this wing imports the stages (`calls`), `budget`, `render`, `tools`, the vocabulary and `safety`;
it runs items through the agent it is given and never imports `agent`. The Dask engine is imported only when
a batch runs on a cluster.
"""

from __future__ import annotations

from .items import ItemResult, PendingApproval
from .run import BatchRun, start_batch

__all__ = ["BatchRun", "ItemResult", "PendingApproval", "start_batch"]
