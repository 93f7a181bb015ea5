"""The server engine against a real OpenAI-compatible server: llama-cpp-python's, started here
on 127.0.0.1 with the embedded SmolLM2 GGUF (its `server` extra is in localjury's dev extra).

llama-cpp-python's server ignores ``n`` (it returns one sample), takes the schema as
``response_format`` of type json_object with a ``schema`` and returns raw top
log-probabilities: the engine finds out the first and sends k seeded requests per prompt,
one at a time (its default for this server), so a run's requests reach the server in the same
order every time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from localjury import AspectCritic, evaluate
from localjury.errors import EngineError
from localjury.models.registry import ModelSpec, ServerSettings
from localjury.results.record_result import same_results

# a llama-cpp-python server
pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.usefixtures("engines_loaded_once")]
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server extra is not installed (localjury[dev])")

RECORDS = [
    {"id": "ww2", "user_input": "When did the Second World War end?", "response": "It ended in 1945."},
    {"id": "paris", "user_input": "What is the capital of France?", "response": "Paris."},
    {"id": "moon", "user_input": "Who first walked on the Moon?", "response": "Neil Armstrong, in July 1969."},
]
METRICS = [AspectCritic("dated", "The response includes a specific year.")]
CHAT_ANSWERED = '"POST /v1/chat/completions HTTP/1.1" 200'


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server on a free 127.0.0.1 port, as a subprocess;
    its log (uvicorn's access lines included) goes to ``log``."""

    def __init__(self, gguf: Path, log: Path) -> None:
        self.gguf = gguf
        self.log = log
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        # llama-cpp-python's server, with only the llama.cpp kernels proven on this machine
        # (its own params would repack for AMX, which faults on some Xeons).
        launch = (
            "import runpy, sys; from pathlib import Path; "
            "from localjury.engines.native.llamacpp_kernels import kernel_choice, plain_llama; "
            "sys.argv[0] = 'llama_cpp.server'; "
            "ctx = plain_llama(kernel_choice(Path(sys.argv[sys.argv.index('--model') + 1]))); ctx.__enter__(); "
            "runpy.run_module('llama_cpp.server', run_name='__main__')"
        )
        args = [sys.executable, "-c", launch, "--model", str(self.gguf), "--host", "127.0.0.1"]
        # One thread per core this process may use (a pytest worker is pinned to one): two threads
        # on one core wait on each other at every step of llama.cpp's.
        threads = str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
        args += ["--port", str(self.port), "--n_ctx", "2048", "--n_threads", threads, "--model_alias", "smollm2"]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited: {self.log.read_text()[-2000:]}"
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{self.url}/models", timeout=2, trust_env=False).status_code == 200:
                    return
            time.sleep(0.5)
        raise AssertionError(f"the server did not answer in 180 s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def answered(self) -> int:
        """Chat completions the server has answered so far (its access log)."""
        return self.log.read_text(errors="replace").count(CHAT_ANSWERED)


@contextlib.contextmanager
def llama_server(smollm: ModelSpec, tmp_path: Path) -> Iterator[LlamaServer]:
    server = LlamaServer(smollm.gguf_file(), tmp_path / "server.log")
    try:
        server.start()
        yield server
    finally:
        server.kill()


def served(server: LlamaServer, **settings: object) -> ModelSpec:
    return ModelSpec(
        name="smollm2-served", base_url=server.url, max_tokens=96, server=ServerSettings(retries=1, **settings)
    )


def test_a_jury_with_a_served_and_a_local_model_is_schema_valid_and_reproducible(smollm, tmp_path):
    with llama_server(smollm, tmp_path) as server:
        spec = served(server)
        first = evaluate(RECORDS[:2], METRICS, [spec, smollm], strictness=2, seed=11)
        # the served model again, alone, from scratch: the local one is checked by its own tests
        again = evaluate(RECORDS[:2], METRICS, [spec], strictness=2, seed=11, fresh=True)
        log = server.log.read_text()
    assert len(first.results) == len(again.results) == 2
    for result in first.results:
        by_model = {m.model: m for m in result.models}
        assert set(by_model) == {"smollm2-served", smollm.name} and result.score is not None
        judged = by_model["smollm2-served"]
        # every sample parsed against the schema: a vote and a reason each, no abstention
        assert len(judged.votes) == 2 and judged.abstentions == 0 and all(v in (0, 1) for v in judged.votes)
        assert all(r and len(r) <= 200 for r in judged.reasons)
        assert len(judged.p_pass) == 2 and all(p is not None and 0.0 <= p <= 1.0 for p in judged.p_pass)
    served_summary = next(m for m in first.summary.models if m.model == "smollm2-served")
    assert served_summary.engine == "server" and served_summary.path == server.url
    record = next(m for m in first.manifest.models if m.name == "smollm2-served")
    assert record.path == server.url and record.served is not None
    assert (record.served.model, record.served.flavour) == ("smollm2", "llama-cpp-python")
    # llama-cpp-python ignores n: per prompt, the first request asked for 2 and got 1, the
    # second asked for one (2 runs x 2 records x 2 requests)
    assert log.count(CHAT_ANSWERED) == 2 * 2 * 2
    # the same seed, the same requests in the same order: the same samples
    served_first = [next(m for m in r.models if m.model == "smollm2-served") for r in first.results]
    assert same_results(served_first, [r.models[0] for r in again.results])


def test_a_server_killed_mid_run_keeps_what_it_answered_and_the_rerun_generates_only_the_rest(smollm, tmp_path):
    with llama_server(smollm, tmp_path) as server:
        spec = served(server)
        settings = {"strictness": 2, "seed": 5, "chunk_size": 2, "cache": tmp_path / "judgments.sqlite"}
        records = RECORDS  # chunks [ww2, paris], [moon]

        def kill_after_three_answers() -> None:
            # Prompt 1's two samples and prompt 2's first: the server dies while it draws prompt
            # 2's second sample, inside the first chunk.
            while server.answered() < 3:
                time.sleep(0.02)
            server.kill()

        killer = threading.Thread(target=kill_after_three_answers)
        killer.start()
        with pytest.raises(EngineError) as failed:
            evaluate(records, METRICS, [spec], **settings)
        killer.join()
        message = str(failed.value)
        assert f"no answer from the server at {server.url}" in message and "start the server" in message
        assert "(1 of the 2 prompts of this call had been answered)" in message
        assert "the 2 judgments generated before this are kept in the judgment store" in " ".join(
            failed.value.__notes__
        )

        server.start()  # the same port: the same base_url
        resumed = evaluate(records, METRICS, [spec], **settings)
        assert len(resumed.results) == len(records)
        stats = resumed.summary.models[0]
        assert (stats.cached, stats.judgments) == (2, 6)  # 2 from the store, 4 generated
        assert all(len(r.models[0].votes) == 2 and r.models[0].abstentions == 0 for r in resumed.results)
        whole = evaluate(records, METRICS, [spec], **{**settings, "fresh": True})
    assert same_results(resumed.results, whole.results)
