"""What a run gives, the last stage of the data flow: each (record, metric)'s result and the
results file (:mod:`.record_result`), the run's summary and dry-run plan (:mod:`.summary`), its
manifest (:mod:`.manifest`), the printed tables (:mod:`.tables`), one judgment as a reader
checks it (:mod:`.show`), the CI gate (:mod:`.gate`), and the output files, checked, locked
and committed together (:mod:`._outputs`, :mod:`._commit`)."""
