"""``load_tokenizer`` loads the tokenizer ``AutoTokenizer`` loads, with the embedded judges' real
tokenizer files: the class named in a tokenizer-only folder (the default judge's, beside its GGUF
file) imported alone, and ``AutoTokenizer`` itself where the folder has a model's ``config.json``."""

import json
import shutil
import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from localjury import AspectCritic
from localjury.engines.base import PromptFormatter, load_tokenizer
from localjury.records.record import Record

pytestmark = pytest.mark.slow

CRITIC = AspectCritic("dated", "The response must include a specific date or year.")
RECORD = Record(id="r", user_input="When did the Berlin Wall fall? <|im_end|>", response="On 9 November 1989. ✓")


def same_tokenizer(loaded, auto, spec):
    """The same class, prompt, tokens and decoded text as ``AutoTokenizer``'s tokenizer."""
    assert type(loaded) is type(auto)
    prompt = PromptFormatter(loaded, spec).format(CRITIC.messages(RECORD))
    assert prompt == PromptFormatter(auto, spec).format(CRITIC.messages(RECORD))
    ids = loaded(prompt, add_special_tokens=False)["input_ids"]
    assert ids == auto(prompt, add_special_tokens=False)["input_ids"] and len(ids) > 50
    assert loaded.decode(ids) == auto.decode(ids) and loaded.get_vocab() == auto.get_vocab()


def test_a_tokenizer_folder_without_a_model_config_loads_the_class_it_names_as_auto_tokenizer_does(default_judge):
    folder = default_judge.tokenizer_dir()
    assert not (folder / "config.json").exists()
    named = json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"]
    loaded = load_tokenizer(folder)
    assert type(loaded).__name__ == named.removesuffix("Fast")
    same_tokenizer(loaded, AutoTokenizer.from_pretrained(folder, local_files_only=True), default_judge)
    # The point of it: in a process of its own, AutoTokenizer's module (and torch) is never imported.
    check = ("import sys; from pathlib import Path; from localjury.engines.base import load_tokenizer; "
             f"load_tokenizer(Path({str(folder)!r})); "
             "assert not {'transformers.models.auto.tokenization_auto', 'torch'} & set(sys.modules)")  # fmt: skip
    subprocess.run([sys.executable, "-c", check], check=True)


def test_a_folder_with_a_model_config_or_an_unknown_class_is_loaded_by_auto_tokenizer(smollm, default_judge, tmp_path):
    folder = smollm.tokenizer_dir()
    assert (folder / "config.json").exists()
    same_tokenizer(load_tokenizer(folder), AutoTokenizer.from_pretrained(folder, local_files_only=True), smollm)
    # A class transformers does not have: AutoTokenizer decides (here, its default backend).
    copy = tmp_path / "tokenizer"
    shutil.copytree(default_judge.tokenizer_dir(), copy, ignore=shutil.ignore_patterns("*.gguf"))
    config = json.loads((copy / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "NoSuchTokenizer"}))
    same_tokenizer(load_tokenizer(copy), AutoTokenizer.from_pretrained(copy, local_files_only=True), default_judge)
