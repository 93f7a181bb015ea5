"""localjury where evaluators already are: a pytest plugin (:mod:`.pytest_plugin`)."""
