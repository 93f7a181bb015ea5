"""Votes to verdicts and scores (DESIGN.md §1): each model's samples voted to its verdict and
score, the jury's mean, ties and abstentions (:mod:`.voting`), and a judge's graded score
calibrated to a user's labels, Platt scaling and a threshold (:mod:`.calibration`)."""
