"""What this machine's CPU is and can do, as the engines choose their native code paths.

The facts come from the operating system (``/proc/cpuinfo`` on Linux), never from what
worked on another machine. ``LOCALJURY_CPU_FLAGS`` (a space- or comma-separated flag list)
and ``LOCALJURY_CPU_NAME`` replace them, so every branch that depends on them can be tested
on any machine (an AMX Xeon on an AMD EPYC, and the other way round).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: The flags that decide which kernels the engines run: vector widths, bf16 and int8 dot
#: products, Intel's AMX tiles, and ARM's NEON/SVE. Others are kept for the key but not shown.
NOTABLE = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "bf16",
    "i8mm",
)


@dataclass(frozen=True)
class Cpu:
    """The CPU as the kernels see it."""

    name: str
    """The model name (``AMD EPYC``, ``Intel(R) Xeon(R) Platinum 8480+``...)."""
    flags: frozenset[str]
    """Every feature flag the operating system reports."""
    threads: int
    """Hardware threads this process may run on."""
    overridden: bool = False
    """Whether the facts come from ``LOCALJURY_CPU_FLAGS`` rather than the machine."""

    @property
    def amx(self) -> bool:
        """Whether Intel AMX tiles (bf16 or int8) are there: llama.cpp repacks weights for them."""
        return "amx_tile" in self.flags and bool({"amx_bf16", "amx_int8"} & self.flags)

    @property
    def notable(self) -> list[str]:
        """The flags among :data:`NOTABLE` that this CPU has, in that order."""
        return [f for f in NOTABLE if f in self.flags]

    @property
    def key(self) -> str:
        """A short hash of the machine's architecture and every flag: what a cached build or
        measurement is valid for (another CPU, another key)."""
        text = platform.machine() + "|" + " ".join(sorted(self.flags))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def describe(self) -> str:
        """One line: the name, the thread count, the notable flags."""
        flags = " ".join(self.notable) or "no notable vector extensions"
        source = " (from LOCALJURY_CPU_FLAGS)" if self.overridden else ""
        return f"{self.name}, {self.threads} threads: {flags}{source}"


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def compute_threads() -> int:
    """The threads an engine computes with: the hardware threads this process may run on, at
    most ``OMP_NUM_THREADS`` where that is set (torch reads it too; a replica of a sharded run
    sets it to its ``cpus_per_replica``, so that replicas sharing a node do not each take
    every core)."""
    threads = detect().threads
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return min(threads, int(value))
    return threads


def _read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, frozenset[str]]:
    """The model name and flags of the first processor (x86 ``flags``, ARM ``Features``)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return platform.processor() or platform.machine() or "unknown CPU", frozenset()
    name = flags = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = value
        if name and flags:
            break
    return name or platform.machine() or "unknown CPU", frozenset(flags.split())


@cache
def _machine_cpu() -> Cpu:
    name, flags = _read_cpuinfo()
    return Cpu(name=name, flags=flags, threads=_threads())


def detect() -> Cpu:
    """This machine's CPU, or the one ``LOCALJURY_CPU_FLAGS`` / ``LOCALJURY_CPU_NAME`` describe."""
    machine = _machine_cpu()
    flags = os.environ.get("LOCALJURY_CPU_FLAGS")
    name = os.environ.get("LOCALJURY_CPU_NAME")
    if flags is None and name is None:
        return machine
    return Cpu(
        name=name or machine.name,
        flags=frozenset(re.split(r"[\s,]+", flags.strip())) - {""} if flags is not None else machine.flags,
        threads=machine.threads,
        overridden=flags is not None,
    )
