"""The contract as data: the OpenAPI document of the HTTP surface and JSON Schemas of topic records."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import orjson


@cache
def load(name: str) -> Any:
    """A schema document shipped in this package, by file name."""
    return orjson.loads(files(__name__).joinpath(name).read_bytes())


@cache
def raw(name: str) -> bytes:
    return files(__name__).joinpath(name).read_bytes()
