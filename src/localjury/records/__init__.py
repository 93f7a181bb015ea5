"""The records a run judges, the first stage of the data flow: the record model and its
checks (:mod:`.record`), where records come from (:mod:`.readers`: files, Hugging Face
datasets, RAGAS, in passes; :mod:`.inspect_log`: inspect_ai logs), conversations
(:mod:`.conversation`), and the one neutraliser every record-derived string goes through
before it reaches a prompt (:mod:`.neutralise`)."""
