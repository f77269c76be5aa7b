"""Callscreen: call screening for numbers that AI voice agents answer and dial."""

__version__ = "0.1.0"
