"""The shadow role: a candidate policy run over the log in memory, beside the live service (`service.py`)."""
