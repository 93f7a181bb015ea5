"""What the constraint tests share: a byte-level tokenizer every string can be written with,
and its llguidance tokenizer."""

import pytest


@pytest.fixture(scope="module")
def byte_tokenizer():
    """A Hugging Face fast tokenizer whose tokens are the 256 bytes (byte-level BPE, no
    merges) and an end token: every string can be written, one byte a step."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab["<eos>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


@pytest.fixture(scope="module")
def ll(byte_tokenizer):
    import llguidance.hf

    return llguidance.hf.from_tokenizer(byte_tokenizer)
