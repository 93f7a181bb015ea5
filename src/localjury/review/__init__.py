"""``localjury review``: a local page to read every judgment of a run, label it by keyboard, and
hand the labels to ``align``, ``bench -f jsonl`` and ``calibrate``.

The stages of a review, one module each: :mod:`.source` indexes the file under review (a run's
results, a bench's predictions or a labels file), :mod:`.records` finds the records it judged,
:mod:`.labels` keeps the reviewer's labels durably, :mod:`.queue` ties them together with the
queue's filters, :mod:`.agreement` says what the labels show so far, :mod:`.view` renders a
record inert, and :mod:`.app` serves it all (Starlette, Jinja2) to 127.0.0.1 only.
"""
