"""Agent.map on a real Dask cluster: worker processes (LocalCluster), and a scheduler and workers started as
separate processes (`dask scheduler`, `dask worker`) the way a user's cluster is. Kept few and small."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from nbagent import Agent, RateLimit  # noqa: E402
from nbagent.providers.openai import OpenAIChatModel  # noqa: E402
from tests.providers.ratelimited import RateLimitedServer  # noqa: E402


@pytest.fixture(autouse=True)
def _main_module_for_spawn(monkeypatch):
    """Worker processes are spawned, and spawn reads `__main__.__spec__`: an IPython shell made by an earlier
    test in this process puts in a `__main__` without one (a kernel's has it)."""
    main = sys.modules.get("__main__")
    if main is not None and not hasattr(main, "__spec__"):
        monkeypatch.setattr(main, "__spec__", None, raising=False)

KEY = "sk-dask-key-7f3a9c1e5b2d4680"
ROOT = Path(__file__).resolve().parents[2]


async def local_cluster(**env):
    cluster = await distributed.LocalCluster(
        n_workers=2, threads_per_worker=4, processes=True, asynchronous=True, dashboard_address=None,
        worker_dashboard_address=None, env={"PYTHONPATH": str(ROOT), **env})
    client = await distributed.Client(cluster, asynchronous=True)
    return cluster, client


async def test_a_batch_on_worker_processes_holds_the_rate_across_them_with_keys_only_in_their_environment(
        tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # this process has no key: only the workers do
    async with RateLimitedServer(requests_per_minute=1200, latency=0.01) as server:
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)  # each worker's own environment
        try:
            model = OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1")
            agent = Agent(model=model, workspace=tmp_path)
            batch = agent.map(range(60), "item {item}", concurrency=8, engine=client,
                              rate_limit=RateLimit(requests_per_minute=1200))
            seen = []
            batch.subscribe(lambda kind, data: seen.append(data.index) if kind == "item_finished" else None)
            await batch
            logs = await client.get_worker_logs()
            scheduler_logs = await client.get_scheduler_logs()
            pids = set((await client.run(os.getpid)).values())
        finally:
            await client.close()
            await cluster.close()
    assert [r.output for r in batch.results] == [f"echo: item {i}" for i in range(60)]
    assert sorted(seen) == list(range(60))  # streamed back one by one, each once
    assert os.getpid() not in pids and len(pids) == 2  # the items ran in the worker processes
    assert server.limited <= 3  # the rate held across both workers (a second's window at the server)
    assert batch.limiter.granted >= 60 and batch.limiter.rate_limited == server.limited  # one limiter saw all
    # the key reached the provider (from the workers' environment) and nothing else
    assert all(h.get("authorization") == f"Bearer {KEY}" for h in server.headers_seen)
    assert KEY not in repr(logs) and KEY not in repr(scheduler_logs)
    assert all(KEY not in body.decode() for body in server.bodies)
    assert KEY not in repr([(r.input, r.output, r.error) for r in batch.results])


def test_the_shipped_agent_holds_no_key_and_no_client(tmp_path):
    import cloudpickle

    from nbagent.batch.dask import portable_agent
    from nbagent.batch.dask_keys import model_secrets

    header_key = "azure-key-5e1f0c9a7b3d2468"
    agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=KEY,
                                        headers={"api-key": header_key, "x-team": "data"}), workspace=tmp_path)
    shipped = portable_agent(agent, agent.policy)
    blob = cloudpickle.dumps(shipped)
    assert KEY.encode() not in blob and header_key.encode() not in blob
    assert shipped.model.extra_headers == {"x-team": "data"}  # what is not a credential still travels
    assert model_secrets(agent.model) == {"api_key": KEY, "headers": {"api-key": header_key}}  # sent sealed
    assert agent.model.api_key().value == KEY  # the person's own agent keeps its key
    with pytest.raises(TypeError, match="not picklable"):  # control: the key itself refuses to travel
        cloudpickle.dumps(agent.model)


async def test_a_worker_without_a_key_fails_the_batch_at_its_start_with_one_message(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with RateLimitedServer() as server:
        cluster, client = await local_cluster()  # workers started with no key in their environment
        try:
            workers = sorted(cluster.scheduler.workers)
            model = OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1")  # and none given in code
            batch = Agent(model=model, workspace=tmp_path).map(range(200), "{item}", engine=client)
            await asyncio.wait_for(batch.wait(), 60)
        finally:
            await client.close()
            await cluster.close()
    assert batch.status == "stopped" and server.requests == 0
    message = batch.stop_reason
    assert "OPENAI_API_KEY" in message and any(worker in message for worker in workers)
    assert "no item was run" in message
    assert [r.status for r in batch.results] == ["pending"] * 200  # not 200 failures: one message, no item run
    assert all(r.error is None for r in batch.results)


class _Wire:
    """Every frame this process reads or writes on its Dask comms: a LocalCluster's scheduler runs here, so that
    is all the scheduler receives and sends (task graphs, queue messages, scattered data, worker reports)."""

    def __init__(self, monkeypatch) -> None:
        from distributed.comm import tcp

        self.frames: list[bytes] = []
        reading, writing = tcp.from_frames, tcp.to_frames

        async def from_frames(frames, *args, **kwargs):
            self.frames += [bytes(f) for f in frames]
            return await reading(frames, *args, **kwargs)

        async def to_frames(msg, *args, **kwargs):
            frames = await writing(msg, *args, **kwargs)
            self.frames += [bytes(f) for f in frames]
            return frames

        monkeypatch.setattr(tcp, "from_frames", from_frames)
        monkeypatch.setattr(tcp, "to_frames", to_frames)

    def holds(self, secret: str) -> bool:
        data = b"".join(self.frames)
        return secret.encode() in data or secret.encode("utf-16-le") in data


async def test_a_key_given_in_code_reaches_every_worker_sealed_and_nothing_of_the_cluster_holds_it(
        tmp_path, monkeypatch):
    """Keys given in code (`api_key=` from a secrets manager or getpass): the workers have none in their
    environment, nor does this process. The key reaches each worker's model (and its redaction), and not the
    scheduler's traffic (tasks, queues, scattered data), its logs or the workers' logs."""
    import hashlib

    import dask

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wire = _Wire(monkeypatch)
    digest = hashlib.sha256(KEY.encode()).hexdigest()

    def registered_on_worker(digest: str) -> list[str]:  # what the worker's redaction makes of the key
        from nbagent.safety import secrets

        return [secrets.redact(value) for value in list(secrets._registered)
                if hashlib.sha256(value.encode()).hexdigest() == digest]

    with dask.config.set({"distributed.comm.compression": False}):
        async with RateLimitedServer(requests_per_minute=1200, latency=0.01) as server:
            cluster, client = await local_cluster()
            try:
                agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key=KEY),
                              workspace=tmp_path)
                batch = agent.map(range(24), "item {item}", concurrency=4, engine=client,
                                  rate_limit=RateLimit(requests_per_minute=1200))
                await batch
                redacted = await client.run(registered_on_worker, digest)
                logs = await client.get_worker_logs(nanny=True) | await client.get_worker_logs()
                scheduler_logs = await client.get_scheduler_logs()
                state = tmp_path / "cluster-state"
                await client.dump_cluster_state(str(state), format="yaml")
                held = wire.holds(KEY)
                await client.submit(len, KEY, pure=False)  # control: a key in a task's arguments is seen
                control = wire.holds(KEY)
            finally:
                await client.close()
                await cluster.close()
    assert [r.output for r in batch.results] == [f"echo: item {i}" for i in range(24)]
    assert all(h.get("authorization") == f"Bearer {KEY}" for h in server.headers_seen)
    assert all(values == ["[REDACTED:OPENAI_API_KEY]"] for values in redacted.values()) and len(redacted) == 2
    assert not held and control  # the scheduler's traffic never held it; a task argument would have
    assert KEY not in repr(logs) and KEY not in repr(scheduler_logs)
    dumped = [p for p in tmp_path.glob("cluster-state*")]
    assert dumped and all(KEY.encode() not in p.read_bytes() for p in dumped)


async def test_without_the_seal_the_key_would_be_on_the_wire(tmp_path, monkeypatch):
    """The mechanism turned off (the key put in the runner's queue as it is): the same look at the scheduler's
    traffic finds it, so the test above can fail."""
    import dask

    import nbagent.batch.dask as engine

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(engine, "seal", lambda public, secrets, context: repr(secrets).encode())
    wire = _Wire(monkeypatch)
    with dask.config.set({"distributed.comm.compression": False}):
        async with RateLimitedServer() as server:
            cluster, client = await local_cluster()
            try:
                agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key=KEY),
                              workspace=tmp_path)
                batch = agent.map(range(2), "{item}", engine=client)
                await asyncio.wait_for(batch.wait(), 60)
            finally:
                await client.close()
                await cluster.close()
    assert wire.holds(KEY)
    assert server.requests == 0  # the runners refuse keys that were not sealed to them
    assert all(r.status == "failed" and "sealed keys" in r.error for r in batch.results)


async def test_a_worker_killed_mid_batch_loses_nothing_and_counts_nothing_twice(tmp_path):
    async with RateLimitedServer(latency=0.2) as server:
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            batch = agent.map(range(24), "k {item}", concurrency=8, engine=client)
            finished = []
            batch.subscribe(lambda kind, data: finished.append(data.index) if kind == "item_finished" else None)
            while server.requests < 6:
                await asyncio.sleep(0.02)
            victim = next(iter(cluster.workers.values()))
            os.kill(victim.process.pid, 9)  # the worker process dies with items in flight
            await batch
        finally:
            await client.close()
            await cluster.close()
    assert [r.output for r in batch.results] == [f"echo: k {i}" for i in range(24)]
    assert sorted(finished) == list(range(24))  # each item ended once
    assert server.requests >= 24


async def test_a_worker_killed_with_several_items_in_flight_hands_them_to_another_worker(tmp_path):
    """A runner holds items running and waiting; its worker dies: the runner's task starts again elsewhere
    (a new life), and every item the dead one held is handed out again, none lost, none counted twice."""
    async with RateLimitedServer(latency=0.3) as server:
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            batch = agent.map(range(40), "k {item}", concurrency=8, engine=client)
            finished = []
            batch.subscribe(lambda kind, data: finished.append(data.index) if kind == "item_finished" else None)
            while True:  # wait until one worker runs several items and some have ended (mid-stream)
                on = {}
                for index, handle in list(batch._runs.items()):
                    on.setdefault(handle.worker, []).append(index)
                victim = next((w for w, items in on.items() if len(items) >= 3), None)
                if victim is not None and len(finished) >= 4:
                    break
                await asyncio.sleep(0.01)
            held = sorted(on[victim])
            nanny = next(n for n in cluster.workers.values() if n.worker_address == victim)
            os.kill(nanny.process.pid, 9)
            await asyncio.wait_for(batch.wait(), 90)
            executing = await client.run(lambda dask_worker: [str(k) for k, ts in dask_worker.state.tasks.items()
                                                              if ts.state == "executing"])
        finally:
            await client.close()
            await cluster.close()
    assert [r.output for r in batch.results] == [f"echo: k {i}" for i in range(40)]
    assert all(batch.results[i].status == "done" for i in held)
    assert sorted(finished) == list(range(40))  # each item ended once
    assert not any(executing.values())  # the runners ended with the batch


async def test_cancelling_a_batch_on_a_cluster_stops_the_runs_and_leaves_no_task_running(tmp_path):
    async with RateLimitedServer(latency=0.5) as server:
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            batch = agent.map(range(60), "c {item}", concurrency=6, engine=client)
            while len(batch._runs) < 6:
                await asyncio.sleep(0.01)
            assert batch.cancel()
            await asyncio.wait_for(batch.wait(), 30)
            sent = server.requests
            executing = await client.run(lambda dask_worker: [str(k) for k, ts in dask_worker.state.tasks.items()
                                                              if ts.state == "executing"])
            processing = await client.processing()
            await asyncio.sleep(1.0)  # a runner left behind would go on asking
            sent_after = server.requests
        finally:
            await client.close()
            await cluster.close()
    statuses = [r.status for r in batch.results]
    assert batch.status == "cancelled" and statuses.count("cancelled") >= 6
    assert statuses.count("pending") >= 60 - 6 - 6 - statuses.count("done")  # none started after the cancel
    assert not any(executing.values()) and not any(processing.values())
    assert sent_after == sent


async def test_a_stored_batch_on_a_cluster_retries_its_failures_and_resumes_without_asking_again(tmp_path):
    async with RateLimitedServer(latency=0.05) as server:
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            items = ["a", "FAIL b", "c", "d", "FAIL e", "f"]
            batch = agent.map(items, "{item}", concurrency=3, engine=client, session=True)
            await batch
            assert [r.status for r in batch.results] == ["done", "failed", "done", "done", "failed", "done"]
            assert server.max_in_flight <= 3  # the concurrency held across the two workers
            server.fail_word = None
            retry = batch.retry_failed()
            await retry
            asked = server.requests
            resumed = agent.map(items, "{item}", concurrency=3, engine=client, resume=batch.id)
            await resumed
        finally:
            await client.close()
            await cluster.close()
    assert [(r.index, r.output) for r in retry.results] == [(1, "echo: FAIL b"), (4, "echo: FAIL e")]
    assert resumed.resumed == 6 and server.requests == asked  # nothing asked again
    assert [r.output for r in resumed.results] == [f"echo: {i}" for i in items]


async def test_max_cost_holds_for_the_whole_cluster(tmp_path):
    async with RateLimitedServer(latency=0.02) as server:
        server.answer = lambda body: "x" * 4000  # ~1000 output tokens an item
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            probe = agent.map(["one"], "{item}", engine=client)
            await probe
            per_item = probe.results[0].cost
            assert per_item and per_item > 0
            batch = agent.map(range(40), "c {item}", concurrency=4, max_cost=per_item * 5.5, engine=client)
            await batch
        finally:
            await client.close()
            await cluster.close()
    done = [r for r in batch.results if r.status == "done"]
    assert 1 <= len(done) <= 5 and batch.cost <= per_item * 5.5
    assert batch.status == "stopped" and "max_cost" in batch.stop_reason
    assert [r.status for r in batch.results].count("pending") == 40 - len(done)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_scheduler_and_workers_started_as_their_own_processes(tmp_path, monkeypatch):
    """A cluster as a user's is: `dask scheduler` and `dask worker` processes, started without a key; the key is
    given in code, and reaches the workers sealed (what this process sends holds no trace of it)."""
    dask = shutil.which("dask", path=str(Path(sys.executable).parent))
    if dask is None:
        pytest.skip("the dask command is not installed")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wire = _Wire(monkeypatch)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(2):
            procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "4", "--no-dashboard",
                                           "--host", "127.0.0.1"], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        async with RateLimitedServer(requests_per_minute=1200, latency=0.01) as server:
            client = await distributed.Client(address, asynchronous=True, timeout=60)
            try:
                await client.wait_for_workers(2, timeout=60)
                agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key=KEY),
                              workspace=tmp_path)
                batch = agent.map([{"q": f"question {i}"} for i in range(20)], "{q}", engine=client,
                                  rate_limit=RateLimit(requests_per_minute=1200))
                await batch
                logs = await client.get_worker_logs()
                scheduler_logs = await client.get_scheduler_logs()
            finally:
                await client.close()
    finally:
        for proc in procs[::-1]:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
    assert [r.output for r in batch.results] == [f"echo: question {i}" for i in range(20)]
    assert all(h.get("authorization") == f"Bearer {KEY}" for h in server.headers_seen)
    assert server.limited <= 2
    assert wire.frames and not wire.holds(KEY)
    assert KEY not in repr(logs) and KEY not in repr(scheduler_logs)


async def test_a_synchronous_client_as_a_notebook_makes_it(tmp_path):
    """`Client()` in a notebook is synchronous (its loop on a thread of its own): the batch bridges to it."""
    async with RateLimitedServer() as server:
        cluster = await asyncio.to_thread(
            distributed.LocalCluster, n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
            worker_dashboard_address=None, env={"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY})
        client = await asyncio.to_thread(distributed.Client, cluster)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            batch = agent.map(["x", "y", "z"], "{item}", engine=client)
            await batch
        finally:
            await asyncio.to_thread(client.close)
            await asyncio.to_thread(cluster.close)
    assert [r.output for r in batch.results] == ["echo: x", "echo: y", "echo: z"]


async def test_max_cost_on_a_cluster_with_a_failing_first_item_reserves_an_estimate(tmp_path):
    async with RateLimitedServer(latency=0.05) as server:
        server.answer = lambda body: "x" * 2000  # ~500 tokens out an item: less than an item is reckoned (1,000)
        cluster, client = await local_cluster(OPENAI_API_KEY=KEY)
        try:
            agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1"), workspace=tmp_path)
            items = ["FAIL first"] + [f"c {i}" for i in range(1, 30)]
            batch = agent.map(items, "{item}", concurrency=8, max_cost=1.0, engine=client)
            reserve = batch.first_request_cost(1)
            batch.max_cost = reserve * 3.5  # set before the batch's task first runs
            await batch
        finally:
            await client.close()
            await cluster.close()
    assert batch.results[0].status == "failed"
    assert batch.cost <= reserve * 3.5
    assert batch.status == "stopped" and "max_cost" in batch.stop_reason
    # Until an item is measured, starts are bounded by reservations (on a cluster the item after the failed one
    # runs alone); once one is done, each start reserves what it cost (less than reckoned here): never more at
    # once than the budget covers at that cost, and never every worker on nothing. (This said `<= 3`, which held
    # only when those requests happened not to overlap at the server: the budget allows 5 once 1 is measured.)
    measured = max(r.cost for r in batch.results if r.status == "done")
    assert measured < reserve
    assert server.max_in_flight <= int((reserve * 3.5 - measured) / measured) < 8
