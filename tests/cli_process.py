"""The CLI in a subprocess, as a user runs it: optionally with every way out to the network
refused, so that a connection attempt fails the run."""

import json
import os
import subprocess
import sys
from pathlib import Path

# Run the CLI with every way out to the network refused: a connection attempt raises.
GUARDED = """
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("localjury tried to open a network connection: " + repr(args[1:2]))
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
if sys.argv[1] == "--probe":
    import urllib.request
    urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
from localjury.cli import main
main()
"""


def cli(*args, guarded=False, **kwargs):
    code = GUARDED if guarded else "from localjury.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,
    )


def finish(proc, timeout=900):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def localjury(*args, env=None, cwd=None):
    """Run the CLI in a subprocess to its end: the completed process (exit code, stdout, stderr)."""
    return subprocess.run(
        [sys.executable, "-c", "from localjury.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
