"""The folds: each topic's records through the domain's pure folds, by one shell (`shell.py`)."""
