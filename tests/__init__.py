from pathlib import Path

#: The repository's root (tests run from anywhere; this folder is its ``tests/``).
ROOT = Path(__file__).resolve().parents[1]
