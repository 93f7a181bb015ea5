"""What holds an engine's output to a metric's schema, apart from the engines that decode:

- :mod:`~localjury.engines.constrain.schemas`: a JSON schema compiled into Outlines' index and
  guides over a model's vocabulary;
- :mod:`~localjury.engines.constrain.index_cache`: those compiled indexes, kept in the process
  and on disk;
- :mod:`~localjury.engines.constrain.quotes`: the grammar that holds quoted evidence to a
  record's own text (pure string work);
- :mod:`~localjury.engines.constrain.thinking_budget`: a budgeted thinking block before the answer's
  grammar (pure string work);
- :mod:`~localjury.engines.constrain.grammars`: llguidance matchers of those grammars;
- :mod:`~localjury.engines.constrain.masks`: a batch's token masks, whichever writes them, and
  the decision figures read where a row writes its decision;
- :mod:`~localjury.engines.constrain.verdicts`: where a judge writes its decision, and verdict
  probabilities read from an engine's top log-probabilities.
"""
