"""How each kind of metric is judged: what it asks each model (its prompts and their
constraints), how it reads the answers, and how it votes and scores. ``kinds`` holds the
table a new kind of metric is added to; ``base`` the protocol every judging follows and the
judging of a yes/no criterion; each other module one kind."""
