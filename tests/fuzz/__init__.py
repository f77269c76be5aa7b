"""`make fuzz`: Schemathesis against a real service (`python -m tests.fuzz.run`); not part of `make test`."""
