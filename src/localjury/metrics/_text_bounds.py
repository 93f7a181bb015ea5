"""The bound on the texts a metric's definition brings into every prompt: a criterion's name
and statement, a rubric's criterion and level descriptions, a checklist's criteria, a judge
profile's criterion and labeled examples.

Records are bounded by their judges' context before any tokenizer reads them
(:func:`localjury.metrics.prompt_fit.over_bound`); a metric's texts come from options and files read
before any judge is known, so their bound is fixed: :data:`MAX_SPEC_TEXT_BYTES`, checked
where they are parsed (``--criterion``, criteria files, rubric files, judge profiles).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator

from localjury.errors import MetricError

#: The most UTF-8 bytes of one text of a metric's definition: 1 MiB. A criterion is shown
#: whole in every prompt beside the record; 1 MiB of prose is about 250,000 tokens, past the
#: context of any judge (the embedded ones read 8,192 tokens; the longest contexts, 131,072),
#: and about a two-hundredth of the text that makes a Hugging Face tokenizer abort the process
#: (a failed allocation in Rust, at a few hundred MB), so that a prompt of several of them
#: (a checklist, a rubric's levels, a profile's demonstrations) stays far from it.
MAX_SPEC_TEXT_BYTES = 1 << 20


def spec_text_problem(text: str) -> str | None:
    """Why ``text`` cannot be part of a metric's definition, or None: it is over
    :data:`MAX_SPEC_TEXT_BYTES`, or holds a lone surrogate (not text: no prompt or hash can
    encode it; a command line's undecodable bytes arrive as such)."""
    if len(text) > MAX_SPEC_TEXT_BYTES:  # a character is a byte or more: over, whatever it holds
        return f"is over the {MAX_SPEC_TEXT_BYTES:,}-byte bound on a text of a metric (it has {len(text):,} characters)"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return f"is not valid text (a lone surrogate, {text[exc.start]!r}, at character {exc.start}); write it as UTF-8"
    if size > MAX_SPEC_TEXT_BYTES:
        return f"is {size:,} bytes in UTF-8, over the {MAX_SPEC_TEXT_BYTES:,}-byte bound on a text of a metric"
    return None


def check_metric_texts(owner: str, texts: dict[str, Any]) -> None:
    """Refuse a metric built in code whose texts (by what each is: ``{"criterion": ...}``;
    strings anywhere inside the values, such as a few-shot example's fields) are over the bound.

    Args:
        owner: Whose texts, for the message: ``metric 'dated'``, ``a prompt program``.
        texts: What each text is -> the text (or a structure holding texts).

    Raises:
        MetricError: Naming the owner, the text and the bound.
    """
    for what, value in texts.items():
        for where, text in _strings(what, value):
            problem = spec_text_problem(text)
            if problem is not None:
                raise MetricError(f"{owner}: its {where} {problem}")


def _strings(where: str, value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(f"{where}.{key}", item)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _strings(f"{where}[{i}]", item)


def check_spec_text(text: str) -> str:
    """``text``, when it may be part of a metric's definition (a pydantic field validator).

    Raises:
        ValueError: Saying why not (see :func:`spec_text_problem`).
    """
    problem = spec_text_problem(text)
    if problem is not None:
        raise ValueError(f"the text {problem}")
    return text


def check_spec_texts(texts: list[str]) -> list[str]:
    """``texts``, when together (as a record's ``retrieved_contexts`` are bounded) they may be
    part of a metric's definition (a pydantic field validator).

    Raises:
        ValueError: Saying why not (see :func:`spec_text_problem`).
    """
    for i, text in enumerate(texts):
        problem = spec_text_problem(text)
        if problem is not None:
            raise ValueError(f"text {i} {problem}")
    size = sum(len(text.encode("utf-8")) for text in texts)
    if size > MAX_SPEC_TEXT_BYTES:
        raise ValueError(
            f"the {len(texts):,} texts are {size:,} bytes in UTF-8 together, over the {MAX_SPEC_TEXT_BYTES:,}-byte "
            "bound on the texts of a metric"
        )
    return texts


#: A text of a metric's definition as a pydantic field: refused over the bound (a rubric
#: file's entries, a judge profile's criterion and examples).
SpecText = Annotated[str, AfterValidator(check_spec_text)]
#: Texts bounded together, as a record's ``retrieved_contexts`` are.
SpecTexts = Annotated[list[str], AfterValidator(check_spec_texts)]
