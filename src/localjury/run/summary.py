"""The run summary: each metric's figures and each model's counters and throughput."""

from __future__ import annotations

from localjury._version import __version__
from localjury.results.summary import MetricSummary, ModelSummary, Summary
from localjury.run.assemble import MetricAcc
from localjury.run.context import Run


def summarize(
    run: Run,
    acc: dict[str, MetricAcc],
    total: int,
    errors: int,
    *,
    dataset: str | None,
    started_at: str,
    seconds: float,
) -> Summary:
    """The summary of a run over ``total`` records (``errors`` of them bad) from its figures."""
    metric_summaries = []
    for j in run.judgings:
        a = acc[j.metric.name]
        metric_summaries.append(
            MetricSummary(
                metric=j.metric.name,
                kind=j.kind,
                definition=j.metric.description,
                strictness=j.k,
                tie_break=j.tie,
                records=a.records,
                scored=a.scored,
                mean_score=a.total / a.scored if a.scored else None,
                pass_rate=a.passed / a.scored if a.scored else None,
                position_consistency=a.consistent / a.paired if a.paired else None,
                records_cut=a.records_cut,
                turns_cut=a.turns_cut,
            )
        )
    model_summaries = [
        ModelSummary(
            model=st.spec.name,
            path=st.spec.location,
            engine=st.spec.engine,
            judgments=st.used,
            cached=st.cached,
            abstentions=st.abstentions,
            abstained_verdicts=st.unscored,
            pass_rate=st.passes / st.decided if st.decided else None,
            load_seconds=round(st.load_seconds, 3),
            generate_seconds=round(st.generate_seconds, 3),
            judgments_per_second=st.generated / st.generate_seconds if st.generate_seconds else None,
            output_tokens=st.output_tokens,
            output_tokens_per_second=st.output_tokens / st.generate_seconds if st.generate_seconds else None,
            prompt_tokens=st.prompt_tokens,
            prompt_tokens_reused=st.reused_tokens,
            samples_saved=st.saved,
            replicas=st.replicas,
            lost_records=st.lost_records,
        )
        for st in run.stats.values()
    ]
    sampling = run.config.sampling
    return Summary(
        localjury_version=__version__,
        dataset=dataset,
        records=total,
        record_errors=errors,
        seed=sampling.seed,
        temperature=sampling.temperature,
        max_tokens=sampling.max_tokens,
        metrics=metric_summaries,
        models=model_summaries,
        extractor=run.extractor.spec.name if run.extractor is not None else None,
        started_at=started_at,
        seconds=round(seconds, 3),
    )
