"""What a worker sends: appends in order, answers to the edge, dead letters."""
