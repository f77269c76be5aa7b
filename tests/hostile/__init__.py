"""Hostile input, faults and growth: what an attacker or an accident sees of the service."""
